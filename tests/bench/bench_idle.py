"""What CloudPivot costs when nothing runs (issue 11): `make bench BENCH_ARGS="-k idle"` (BENCH_IDLE_SECONDS=N).

Starts CloudPivot as `make run` does (`manage.py serve --bootstrap`: Daphne, the qcluster and the
host agent) in a fresh var dir, on the embedded default (or on PostgreSQL + Redis when DATABASE_URL
and REDIS_URL are set), runs one task so every process has done its start-up work (workers forked,
the agent connected), lets it settle, then sums the CPU of every CloudPivot process over N seconds
(default 60) of doing nothing: utime+stime from /proc of the serve process tree and of the detached
host agent's tree, reaped children counted once through their parents' cutime+cstime. It prints the
figure as a share of one core, by process group. The target is under 2 %.

The scheduled jobs (metrics every minute, health every 5 minutes …) run in this window as they would
on any idle installation, so they are in the figure. A figure, not an assertion: the machine is shared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from tests import helpers

TICKS = os.sysconf("SC_CLK_TCK")
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "UNKNOWN")


def cpu_by_group(roots: list[int]) -> dict[str, float]:
    """CPU seconds of the process trees under `roots`, by group (each tick counted once)."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]), command)
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (parent, _, _) in table.items():
        children[parent].append(pid)
    seen, stack = set(), [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            stack += children[pid]
    groups: dict[str, float] = defaultdict(float)
    for pid in seen:
        groups[_group(table[pid][2])] += table[pid][1] / TICKS
    return groups


def _group(command: str) -> str:
    for word, group in (
        ("daphne", "web (daphne)"),
        ("qcluster", "workers (qcluster)"),
        ("cloudpivot_agent", "host agent"),
        ("serve", "serve"),
    ):
        if word in command:
            return group
    return "other"


def test_idle(tmp_path):
    seconds = float(os.environ.get("BENCH_IDLE_SECONDS", "60"))
    port = helpers.free_port()
    env = dict(os.environ) | {
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base",
        "CLOUDPIVOT_VAR_DIR": str(tmp_path / "var"),
        "PORT": str(port),
        "CLOUDPIVOT_QUEUE_NAME": f"bench-idle-{os.getpid()}",
        "CLOUDPIVOT_LOG_LEVEL": "WARNING",
    }
    database = "PostgreSQL + Redis" if env.get("DATABASE_URL") else "embedded default (SQLite)"
    log_path = tmp_path / "serve.log"
    log = log_path.open("w")
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bootstrap"],
        cwd=helpers.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        token = _token(serve, log_path)
        base = f"http://127.0.0.1:{port}/api/v1/tasks"
        task = helpers.api_call(base, "POST", "", token, {"cloud": "local", "command": ["true"]}, timeout=60)
        deadline = time.monotonic() + 60
        while helpers.api_call(base, "GET", f"/{task['id']}", token)["state"] not in TERMINAL:
            assert time.monotonic() < deadline, "the warm-up task did not finish within 60 s"
            time.sleep(0.1)
        time.sleep(10)  # cleanups, the task's last reports, the first schedules: then nothing is left to do

        roots = [serve.pid] + _agent_pids(tmp_path / "var" / "runs")
        before = cpu_by_group(roots)
        began = time.monotonic()
        time.sleep(seconds)
        after = cpu_by_group(roots)
        elapsed = time.monotonic() - began

        cpu = {group: after.get(group, 0) - before.get(group, 0) for group in set(before) | set(after)}
        total = sum(cpu.values())
        print(f"\n=== Idle cost, {database}: CPU of every CloudPivot process over {elapsed:.0f} s with nothing to do")
        print(f"  all processes: {100 * total / elapsed:5.2f} % of one core ({1000 * total:.0f} ms CPU)")
        for group in sorted(cpu, key=lambda g: -cpu[g]):
            print(f"    {group:22s} {100 * cpu[group] / elapsed:5.2f} %")
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=30)
        finally:
            helpers.stop_process_group(serve, sig=signal.SIGKILL)
            log.close()


def _token(serve: subprocess.Popen, log: Path) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("  api token:"):
                return line.split()[-1]
        assert serve.poll() is None, "serve exited before printing the token: " + log.read_text()[-2000:]
        time.sleep(0.2)
    raise AssertionError("serve printed no token within 120 s")


def _agent_pids(runs_dir: Path) -> list[int]:
    """The host agent is detached (its own session, not a child of serve): a root of its own."""
    try:
        text = (runs_dir / "agent.lock").read_text().strip()
    except OSError:
        return []
    return [int(text)] if text.isdigit() else []
