"""The host agent rotates its agent.log by size (runner_api/agent/cloudpivot_agent_log.py).

A real agent process, its standard output and error on the runs directory's agent.log opened for appending,
as a worker launches it (clusters/backends/local.py). Its server never answers (a closed loopback port), so
it logs a `sync failed` line at every retry (0.5 s, 1 s, 2 s …): with a limit of a few lines, agent.log is
rotated while it runs.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests import helpers

AGENT = helpers.BASE_DIR / "runner_api" / "agent" / "cloudpivot_agent.py"
LIMIT = 400  # bytes: three of the agent's lines


def start_agent(runs: Path, output: Path, *options: str) -> subprocess.Popen:
    (runs / "agent.credential").write_text("cpa_rotation_test\n")
    with output.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, str(AGENT), "--server-url", f"http://127.0.0.1:{helpers.free_port()}"]
            + ["--credential-file", str(runs / "agent.credential"), "--state-dir", str(runs), "--name", "rotation"]
            + list(options),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


def stop(agent: subprocess.Popen) -> None:
    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=30)


def text(path: Path) -> str:
    """A file's text; "" while a rotation has renamed it and not yet made the next one."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_agent_log_is_rotated_by_size_keeping_the_newest_files(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    log = runs / "agent.log"
    log.write_text("before 0\n" * 50)  # 450 bytes: the agent's first line rotates it
    (runs / "agent.log.1").write_text("before 1\n")
    (runs / "agent.log.2").write_text("before 2\n")
    agent = start_agent(runs, log, "--log-max-bytes", str(LIMIT), "--log-keep", "2")
    try:  # a loaded machine may see several rotations between two looks: only what no timing changes is asserted
        helpers.wait_for(
            lambda: "sync failed" in text(runs / "agent.log.1"),
            timeout=60,
            what="agent.log rotated again while the agent runs",
        )
    finally:
        stop(agent)
    assert "stopping" in log.read_text()  # the last line, in the fresh file
    assert sorted(p.name for p in runs.glob("agent.log*")) == ["agent.log", "agent.log.1", "agent.log.2"]
    assert not any("before 1" in p.read_text() or "before 2" in p.read_text() for p in runs.glob("agent.log*"))
    for path in runs.glob("agent.log*"):  # two files kept, each within the limit (but the one it found)
        if "before" not in path.read_text():
            assert 0 < path.stat().st_size <= LIMIT, (path.name, path.read_text())


def test_a_standard_error_that_is_not_agent_log_is_never_rotated(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    elsewhere = tmp_path / "service.log"  # a service manager's file, say
    elsewhere.write_text("before\n" * 100)
    agent = start_agent(runs, elsewhere, "--log-max-bytes", str(LIMIT))
    try:
        helpers.wait_for(lambda: elsewhere.read_text().count("sync failed") >= 2, timeout=30, what="two retries")
    finally:
        stop(agent)
    assert elsewhere.read_text().startswith("before\n" * 100)
    assert not list(runs.glob("agent.log*")) and not list(tmp_path.glob("service.log.*"))
