"""Dependencies fail under running tasks (issue 16, item 2; docs/deploy.md, "Dependencies fail").

Each test runs a CloudPivot of its own (tests/plugins/dependencies.py): a web server, a qcluster and the host
agent they launch for the `local` cloud, on a PostgreSQL, a Redis or a file system that only the test uses,
so that stopping or filling it disturbs nobody else. Tasks print numbered lines while the dependency fails;
afterwards every task must have SUCCEEDED with its stored log equal, byte for byte, to what it printed, and a
websocket follower of the task page's stream must hold the same bytes, received without a gap or a
duplicate across its reconnections.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from tests import helpers
from tests.plugins.dependencies import Installation, LogFollower, fill

pytestmark = [pytest.mark.e2e]

LINE_PAD = "x" * 60


def printer(tag: str, lines: int, pause: float) -> list[str]:
    """A program printing `lines` numbered lines, `pause` seconds apart."""
    code = (
        "import time\n"
        f"for i in range({lines}):\n"
        f"    print('{tag} %05d {LINE_PAD}' % i, flush=True)\n"
        f"    time.sleep({pause})\n"
    )
    return ["python3", "-c", code]


def printed(tag: str, lines: int) -> str:
    return "".join(f"{tag} {i:05d} {LINE_PAD}\n" for i in range(lines))


class Watch(threading.Thread):
    """Asks the API (a list and one task's log) every 0.2 s while a dependency is away; keeps every status."""

    def __init__(self, installation: Installation, task_id: str) -> None:
        super().__init__(daemon=True)
        self.installation, self.task_id = installation, task_id
        self.answers: list[tuple[int, str, str]] = []  # (status, Retry-After, path)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for path in ("/api/v1/tasks", f"/api/v1/tasks/{self.task_id}/logs"):
                status, headers, _ = self.installation.call(path)
                self.answers.append((status, headers.get("Retry-After", ""), path))
            self.done.wait(0.2)

    def stop(self) -> list[tuple[int, str, str]]:
        self.done.set()
        self.join(timeout=60)
        return self.answers


def task_state(installation: Installation, task_id: str) -> str:
    status, _, body = installation.call(f"/api/v1/tasks/{task_id}")
    return json.loads(body)["state"] if status == 200 else ""


def run_through(installation: Installation, fault, *, tasks: int = 3, lines: int = 150, pause: float = 0.1) -> dict:
    """Submit `tasks` printers and follow the first on two websockets; run `fault(ids, follower)` once every
    task prints, then wait for the end and check every log. `fault` may make the second follower reconnect;
    the first keeps its connection if the server does. Returns what `fault` returned."""
    names = [f"t{n}" for n in range(tasks)]
    ids = {name: installation.submit(printer(name, lines, pause), name) for name in names}
    followers = [LogFollower(installation, ids["t0"]) for _ in range(2)]
    for follower in followers:
        follower.start()
    try:
        helpers.wait_for(
            lambda: all(installation.log(ids[name]) for name in names),
            timeout=60,
            interval=0.3,
            what="every task to have printed",
        )
        outcome = fault(ids, followers[1]) or {}
        helpers.wait_for(
            lambda: all(task_state(installation, ids[name]) == "SUCCEEDED" for name in names),
            timeout=120,
            interval=0.5,
            what=lambda: "every task SUCCEEDED: " + str({name: task_state(installation, ids[name]) for name in names}),
        )
        for name in names:
            assert installation.log(ids[name]) == printed(name, lines), f"the stored log of {name} differs"
        for follower in followers:
            helpers.wait_for(
                lambda follower=follower: follower.log == printed("t0", lines) or follower.problems,
                timeout=30,
                what=lambda follower=follower: f"a follower to hold the whole log ({len(follower.log)} bytes)",
            )
    finally:
        for follower in followers:
            follower.stop()
    for follower in followers:
        assert follower.problems == [], follower.problems
        assert follower.log == printed("t0", lines)
    assert installation.server_errors() == [], installation.server_errors()[:5]
    return outcome | {"followers": followers}


# ------------------------------------------------------------------------------------------- PostgreSQL
def test_postgresql_restarted_while_tasks_run(private_postgres, tmp_path):
    """The PostgreSQL under a running installation stops for DOWN_SECONDS and starts again. While it is away
    the API answers 503 with Retry-After, never a 500; one follower's websocket stays open through it and goes
    on afterwards; the other drops its connection while the database is away and reconnects (turned away
    with 1013 until the database is back), resuming from its positions."""
    down_seconds = 8
    installation = Installation(tmp_path, database_url=private_postgres.url("cloudpivot"))
    installation.set_up()
    installation.start()

    def restart(ids: dict[str, str], follower: LogFollower) -> dict:
        watch = Watch(installation, ids["t1"])
        private_postgres.stop()
        watch.start()
        time.sleep(down_seconds / 2)
        connections_before = follower.connections
        follower.drop.set()  # the page's network goes: it reconnects while the database is away
        time.sleep(down_seconds / 2)
        private_postgres.start()
        time.sleep(3)
        return {"answers": watch.stop(), "connections_before": connections_before}

    try:
        outcome = run_through(installation, restart)
    finally:
        installation.stop()
    answers = outcome["answers"]
    statuses = {status for status, _, _ in answers}
    assert statuses <= {200, 503}, answers
    assert 503 in statuses, "the database was away, yet nothing answered 503"
    assert all(after.isdigit() for status, after, _ in answers if status == 503), answers
    steady, dropped = outcome["followers"]
    assert dropped.connections > outcome["connections_before"]  # it did reconnect
    assert steady.connections == 1  # the server kept its connection through the outage


# ------------------------------------------------------------------------------------------------ Redis
REDIS_DOWN_SECONDS = float(os.environ.get("CLOUDPIVOT_REDIS_DOWN_SECONDS", "30"))


def test_redis_stopped_while_tasks_run(private_redis, transactional_db, tmp_path):
    """Redis (job broker, channel layer, cache) stops for REDIS_DOWN_SECONDS (30; CI may set less) under
    running tasks. Reading the API needs no Redis: it answers 200 throughout. The websocket follower keeps or
    regains its stream and resumes from its position."""
    installation = Installation(tmp_path, database_url=helpers.database_url(), redis_url=private_redis.url())
    installation.set_up()
    installation.start()
    lines = max(150, int(REDIS_DOWN_SECONDS * 10) + 100)

    def stop_redis(ids: dict[str, str], follower: LogFollower) -> dict:
        watch = Watch(installation, ids["t1"])
        private_redis.stop()
        watch.start()
        time.sleep(REDIS_DOWN_SECONDS)
        private_redis.start()
        return {"answers": watch.stop()}

    try:
        outcome = run_through(installation, stop_redis, lines=lines)
    finally:
        installation.stop()
    statuses = {status for status, _, _ in outcome["answers"]}
    assert statuses == {200}, outcome["answers"][:20]


# ---------------------------------------------------------------------------------------------- disk full
def waiter(tag: str, before: int, release: os.PathLike, after: int) -> list[str]:
    """Prints `before` lines, waits for the file `release` to exist, prints `after` lines and exits 0."""
    code = (
        "import os, time\n"
        f"for i in range({before}):\n"
        f"    print('{tag} %05d {LINE_PAD}' % i, flush=True)\n"
        f"while not os.path.exists({str(release)!r}):\n"
        "    time.sleep(0.05)\n"
        f"for i in range({before}, {before + after}):\n"
        f"    print('{tag} %05d {LINE_PAD}' % i, flush=True)\n"
    )
    return ["python3", "-c", code]


def test_disk_holding_var_full(small_disk, tmp_path):
    """var/ (the SQLite database, the runs directory with the host agent's outbox and the programs' output) on
    a small file system of the test's own, filled to ENOSPC while two tasks run.

    While it is full: a submission is refused with 507 `storage_full` and a message (never a 500, never
    accepted and lost);
    reading still works; a program that ends then (`early`) has its end held by its supervisor and the agent
    (the server cannot record it), and the task stays RUNNING. Programs do not print while the disk is full:
    their own output files are on it, so their writes would fail in the program, which no server can repair.
    Once the space is freed: `early` SUCCEEDS, `late` prints the rest of its lines and SUCCEEDS, both logs
    byte-complete, and a new task runs."""
    installation = Installation(tmp_path, database_url=f"sqlite:///{small_disk}/cloudpivot.sqlite3", var_dir=small_disk)
    installation.set_up()
    installation.start()
    early_release, late_release = tmp_path / "release-early", tmp_path / "release-late"
    ids = {
        "early": installation.submit(waiter("early", 100, early_release, 0), "early"),
        "late": installation.submit(waiter("late", 100, late_release, 100), "late"),
    }
    try:
        helpers.wait_for(
            lambda: all(installation.log(ids[name]) == printed(name, 100) for name in ids),
            timeout=60,
            interval=0.3,
            what="both tasks to have printed their first lines",
        )
        filler = fill(small_disk)
        status, headers, body = installation.call("/api/v1/tasks", {"cloud": "local", "command": ["true"]})
        assert status == 507, (status, body[:500])
        assert json.loads(body)["code"] == "storage_full" and headers["Retry-After"].isdigit()
        assert installation.call("/api/v1/tasks")[0] == 200  # reading needs no room
        early_release.touch()
        time.sleep(5)  # the program ends; its end cannot be written on the server's side
        assert task_state(installation, ids["early"]) == "RUNNING"
        assert installation.call("/api/v1/tasks")[0] == 200
        os.remove(filler)
        late_release.touch()
        helpers.wait_for(
            lambda: all(task_state(installation, ids[name]) == "SUCCEEDED" for name in ids),
            timeout=90,
            interval=0.5,
            what=lambda: "both tasks SUCCEEDED: " + str({name: task_state(installation, ids[name]) for name in ids}),
        )
        assert installation.log(ids["early"]) == printed("early", 100)
        assert installation.log(ids["late"]) == printed("late", 200)
        after = installation.submit(printer("after", 3, 0), "after")
        helpers.wait_for(lambda: task_state(installation, after) == "SUCCEEDED", timeout=60, what="a new task to run")
    finally:
        installation.stop()
    assert installation.server_errors() == [], installation.server_errors()[:5]
