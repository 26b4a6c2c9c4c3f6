"""Backup and restore with tasks running (issue 16, item 6; docs/operations.md, "Backup and restore").

An installation of the test's own (tests/e2e/installation.py) runs tasks on the `local` cloud: two have
ended, two are running. The backup is taken as docs/operations.md says, online: the database first
(`pg_dump`, or SQLite's online `.backup`), then var/ (the secret key and the runs directory, whose files
hold what the database has not heard yet). Then the host is lost: every process goes, the programs too.
The restore goes into a fresh database and a fresh var/ at another path, and the installation starts again.

Afterwards, per the Runner contract: the ended tasks keep their outcome and log; the running ones are
reported UNKNOWN by the new host agent at once (their supervisor is gone without an exit status), never
run again, with their log byte for byte what the restored runs directory holds; a task submitted after the
restore reads a project secret saved before the backup (var/secret_key decrypts it) and succeeds.
Dropping var/ from the restore makes it fail: the running tasks then wait for the heartbeat deadline, and
the secret cannot be read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import helpers
from tests.e2e.installation import Installation, PostgresDatabases, chatty, runs_of, using_postgresql
from tests.plugins.servers import kill_leftover_runners

pytestmark = [pytest.mark.e2e]
SECRET = "correct horse battery staple"


def backup(site: Installation, into: Path) -> None:
    """docs/operations.md, "Backup": the database, then var/ without the database files and static files."""
    into.mkdir()
    if site.database_url.startswith("postgres"):
        subprocess.run(["pg_dump", "-Fc", "-f", str(into / "cloudpivot.dump"), site.database_url], check=True)
    else:
        database = site.var_dir / "cloudpivot.sqlite3"
        subprocess.run(["sqlite3", str(database), f".backup '{into / 'cloudpivot.sqlite3'}'"], check=True)
    archive = subprocess.run(
        [
            "tar", "-C", str(site.var_dir), "-czf", str(into / "var.tar.gz"),
            "--exclude=./cloudpivot.sqlite3*", "--exclude=./staticfiles", ".",
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert archive.returncode in (0, 1), archive.stderr  # 1: a file changed while it was read (the runs directory)


def restore(backup_dir: Path, var_dir: Path, database_url: str, *, with_var: bool = True) -> None:
    """docs/operations.md, "Restore": var/ first (the SQLite database lives in it), then the database."""
    var_dir.mkdir(mode=0o700, parents=True)
    if with_var:
        subprocess.run(["tar", "-C", str(var_dir), "-xzf", str(backup_dir / "var.tar.gz")], check=True)
    if database_url.startswith("postgres"):
        command = ["pg_restore", "--no-owner", "--exit-on-error", "-d", database_url]
        subprocess.run([*command, str(backup_dir / "cloudpivot.dump")], check=True)
    else:
        shutil.copy(backup_dir / "cloudpivot.sqlite3", var_dir / "cloudpivot.sqlite3")


def held_output(runs_dir: Path) -> dict[str, bytes]:
    """task id → the stdout a runs directory holds for it."""
    found = {}
    for assignment in runs_dir.glob("*/assignment.json"):
        stdout = assignment.parent / "stdout"
        found[json.loads(assignment.read_text())["task_id"]] = stdout.read_bytes() if stdout.exists() else b""
    return found


@pytest.fixture
def databases():
    made = PostgresDatabases() if using_postgresql() else None
    yield made
    if made:
        made.drop_all()


def test_backup_while_tasks_run_then_restore_elsewhere(databases, tmp_path):
    def database_for(var_dir: Path, name: str) -> str:
        return databases.fresh(name) if databases else f"sqlite:///{var_dir / 'cloudpivot.sqlite3'}"

    old_var, new_var = tmp_path / "old" / "var", tmp_path / "new" / "var"
    work, gate = tmp_path / "work", tmp_path / "gate"  # the gate is never opened: the running ones never end
    work.mkdir()
    old = Installation(tmp_path / "old", var_dir=old_var, database_url=database_for(old_var, "source"))
    try:
        old.set_up()
        old.start_web()
        old.start_workers()
        old.start_agent()
        old.api("POST", "/projects/demo/secrets", {"name": "db-password", "value": SECRET})
        ids = {
            "done": old.submit(["sh", "-c", f'echo run >> "{work}/done.runs"; echo done line']),
            "failed": old.submit(["sh", "-c", f'echo run >> "{work}/failed.runs"; echo failing; exit 3']),
        }
        old.wait_final(ids, timeout=60)
        for name in ("running1", "running2"):
            ids[name] = old.submit(chatty(work, name, gate))
        helpers.wait_for(
            lambda: all(old.stdout(ids[n]).count("\n") >= 3 for n in ("running1", "running2")),
            timeout=60,
            what="the running tasks to have printed a few lines",
        )
        backup(old, tmp_path / "backup")
    finally:
        old.stop()
        kill_leftover_runners(tmp_path / "old")  # the host is lost: its programs and supervisors go too
    shutil.rmtree(tmp_path / "old")

    new_database = database_for(new_var, "restored")
    restore(tmp_path / "backup", new_var, new_database)
    held = held_output(new_var / "runs")
    new = Installation(tmp_path / "new", var_dir=new_var, database_url=new_database)
    try:
        new.manage("migrate", "--noinput", "-v", "0")  # nothing to apply: the same release
        new.token = old.token
        new.start_web()
        new.start_workers()
        new.start_agent()
        ids["after"] = new.submit(
            ["sh", "-c", f'echo run >> "{work}/after.runs"; test "$P" = "{SECRET}" && echo secret ok'],
            secrets=[{"name": "db-password", "env": "P"}],
        )
        tasks = new.wait_final(ids, timeout=45)  # well inside the heartbeat deadline (60 s)
        logs = {name: new.stdout(task_id) for name, task_id in ids.items()}
    finally:
        new.stop()
        kill_leftover_runners(tmp_path / "new")

    assert {name: task["state"] for name, task in tasks.items()} == {
        "done": "SUCCEEDED",
        "failed": "FAILED",
        "running1": "UNKNOWN",
        "running2": "UNKNOWN",
        "after": "SUCCEEDED",
    }, {name: task["state_reason"] for name, task in tasks.items()}
    for name, task in tasks.items():
        assert runs_of(work, name) == task["attempts_count"] == 1, (name, task)
    assert logs["done"] == "done line\n" and logs["failed"] == "failing\n"
    assert logs["after"] == "secret ok\n"
    for name in ("running1", "running2"):
        logged = logs[name]
        assert logged.encode() == held[ids[name]], name  # every byte the restored runs directory held
        assert (work / f"{name}.out").read_text().startswith(logged) and logged.count("\n") >= 3
