"""An upgrade with tasks running (issue 16, item 6; docs/operations.md, "Upgrade"): migrations first, then a
rolling restart of every process, web, workers, host agent, one at a time.

The installation is the test's own (tests/e2e/installation.py): two web processes on one port, two qclusters,
the host agent run as a service, on a database of its own (the test run's kind: SQLite or PostgreSQL) and
Redis. The pending migration is real: the installation is first taken back one step on `tasks` (its last
migration, which must be an index alone), so `migrate` during the upgrade builds that index on a table the
running tasks write to. What this cannot show is old code beside new code: both sides of the
restart run this tree; it shows that a release's migrations apply under a live installation and that every
process can be replaced under running tasks.

While it happens a prober polls the API and /readyz: every answer is 200, or 503 with Retry-After; never a
500 and never a refused connection. Afterwards every task has ended right (one of them cancelled while the
agent was down), its log is byte for byte what its program printed, and no program ran twice.
"""

from __future__ import annotations

import pytest

from tests import helpers
from tests.e2e.installation import (
    Installation,
    PostgresDatabases,
    Prober,
    chatty,
    redis_url,
    runs_of,
    using_postgresql,
)

pytestmark = [pytest.mark.e2e]


def pending_migration() -> tuple[str, str, str]:
    """The last migration of `tasks`, which the release being installed brings. The same tree runs before and
    after it here, so it must be one the code runs beside while it is still unapplied: an index only."""
    from django.db import migrations
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    last, before = sorted(name for app, name in loader.disk_migrations if app == "tasks")[-1:-3:-1]
    operations = loader.disk_migrations[("tasks", last)].operations
    assert all(isinstance(op, migrations.AddIndex) for op in operations), (
        f"tasks.{last} is not an index alone: give this test another index-only migration to apply under load"
    )
    return "tasks", before, last


@pytest.fixture
def installation(tmp_path):
    databases = PostgresDatabases() if using_postgresql() else None
    var_dir = tmp_path / "var"
    url = databases.fresh("upgrade") if databases else f"sqlite:///{var_dir / 'cloudpivot.sqlite3'}"
    site = Installation(tmp_path, var_dir=var_dir, database_url=url, redis=redis_url())
    try:
        yield site
    finally:
        try:
            site.stop()
        finally:
            from tests.plugins.servers import kill_leftover_runners

            kill_leftover_runners(tmp_path)
            if databases:
                databases.drop_all()


def test_migrate_then_rolling_restart_under_running_tasks(installation, tmp_path):
    site = installation
    app, before, pending = pending_migration()
    site.set_up()
    site.manage("migrate", app, before, "-v", "0")  # the release being installed brings `pending`
    site.start_web(2)
    site.start_workers(2)
    first_agent = site.start_agent()

    work, gate = tmp_path / "work", tmp_path / "gate"
    work.mkdir()
    expected = {"ok": "SUCCEEDED", "ok2": "SUCCEEDED", "fails": "FAILED", "cancelled": "CANCELLED"}
    ids = {name: site.submit(chatty(work, name, gate, 3 if name == "fails" else 0)) for name in expected}

    def site_states():
        return {n: site.task(i)["state"] for n, i in ids.items()}

    helpers.wait_for(
        lambda: set(site_states().values()) == {"RUNNING"}, timeout=60, what=lambda: f"running: {site_states()}"
    )

    with Prober(site) as prober:
        output = site.manage("migrate", "--noinput")
        assert f"Applying {app}.{pending}... OK" in output, output  # it was pending, and now it is applied
        for index in range(len(site.web)):
            site.restart_web(index)
        ids["late"] = site.submit(chatty(work, "late", gate))  # through the new web processes, old workers
        expected["late"] = "SUCCEEDED"
        for index in range(len(site.workers)):
            site.restart_workers(index)
        site.stop_agent()
        site.api("POST", f"/tasks/{ids['cancelled']}/cancel")  # carried out by the next agent
        second_agent = site.start_agent()
        helpers.wait_for(lambda: site.task(ids["late"])["state"] == "RUNNING", timeout=60, what="the late task")
        # the cancel is carried out (its program stopped) before the gate lets the others print `end`
        helpers.wait_for(
            lambda: site.task(ids["cancelled"])["state"] == "CANCELLED", timeout=60, what="the cancel, by the new agent"
        )
        gate.touch()
        tasks = site.wait_final(ids, timeout=60)

    assert second_agent != first_agent
    assert {name: task["state"] for name, task in tasks.items()} == expected
    for name, task in tasks.items():
        assert runs_of(work, name) == task["attempts_count"] == 1, (name, task)
        printed, logged = (work / f"{name}.out").read_text(), site.stdout(task["id"])
        if name == "cancelled":  # killed between its two writes at worst: its copy one line ahead
            assert printed.startswith(logged) and printed[len(logged) :].count("\n") <= 1, (printed, logged)
            assert "end" not in printed
        else:
            assert logged == printed and logged.endswith("end\n"), (name, logged, printed)
    assert len(prober.answers) > 20, prober.answers
    assert not prober.faults(), prober.faults()
    web_logs = site.web_log_text()
    assert "Traceback" not in web_logs and "Internal Server Error" not in web_logs, web_logs[-3000:]
