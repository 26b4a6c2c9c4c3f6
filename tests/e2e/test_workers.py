"""The real worker processes: qcluster killed with SIGKILL mid-run and started again.

Every task still reaches its right end state, and no command runs twice: each run
appends one line to a marker file, which must hold exactly one line per attempt.
The commands wait at a gate until qcluster has been killed, so "all three are
running" is a state that holds however slowly a loaded machine starts them.
"""

from __future__ import annotations

import signal

import pytest
from django.core.management import call_command

from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def marked(marker, gate, then: str) -> list[str]:
    """Record the run, wait for the gate file, then go on with `then`."""
    return ["sh", "-c", f'echo run >> "{marker}"; while [ ! -e "{gate}" ]; do sleep 0.1; done; {then}']


def test_tasks_survive_a_killed_qcluster_and_nothing_runs_twice(world, daphne, server_logs, tmp_path):
    call_command("sync_schedules", verbosity=0)
    token = world.tokens["bob"]
    gate = tmp_path / "gate"
    specs = {
        "ok": {"command": marked(tmp_path / "ok", gate, "sleep 2; exit 0")},
        "fails": {"command": marked(tmp_path / "fails", gate, "sleep 1; exit 3"), "retry_limit": 1},
        "slow": {"command": marked(tmp_path / "slow", gate, "sleep 600"), "timeout_seconds": 30},
    }
    workers = helpers.start_qcluster(env=daphne.env, log=server_logs / "qcluster.log")
    try:
        ids = {
            name: helpers.api_call(daphne.url, "POST", "/api/v1/tasks", token, {"cloud": "local", **spec})["id"]
            for name, spec in specs.items()
        }

        def state(name):
            return helpers.api_call(daphne.url, "GET", f"/api/v1/tasks/{ids[name]}", token)["state"]

        helpers.wait_for(
            lambda: all(state(n) == "RUNNING" for n in ids),
            timeout=60,
            what=lambda: f"all tasks running; they are {dict((n, state(n)) for n in ids)}",
        )
        helpers.stop_process_group(workers, sig=signal.SIGKILL)
        gate.touch()
        workers = helpers.start_qcluster(env=daphne.env, log=server_logs / "qcluster.log")
        final = {"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "UNKNOWN"}
        helpers.wait_for(
            lambda: all(state(n) in final for n in ids), timeout=150, interval=0.5, what="all tasks to finish"
        )
    finally:
        helpers.stop_process_group(workers)
        from tests.plugins.servers import kill_leftover_runners

        kill_leftover_runners(tmp_path)  # the host agent is detached from the workers that started it
    tasks = {name: helpers.api_call(daphne.url, "GET", f"/api/v1/tasks/{ids[name]}", token) for name in ids}
    assert {name: t["state"] for name, t in tasks.items()} == {
        "ok": "SUCCEEDED",
        "fails": "FAILED",
        "slow": "TIMED_OUT",
    }
    for name, task in tasks.items():
        runs = (tmp_path / name).read_text().splitlines()
        assert len(runs) == task["attempts_count"], (name, runs, task)
    assert tasks["fails"]["attempts_count"] == 2 and tasks["ok"]["attempts_count"] == 1
