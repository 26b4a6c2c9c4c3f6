"""What one trivial task costs (issue 11): `make bench` (BENCH_ARGS="-k task_cost"; BENCH_TASKS=N).

Starts CloudPivot as `make run` does (`manage.py serve --bootstrap`: Daphne, qcluster and, where the
branch has one, the host agent) on the embedded default in a fresh var dir, then with one sequential
REST client:
1. one task on an idle system, 10 times: submit → SUCCEEDED as the client sees it (polling every 10 ms);
2. N × ["true"] submitted back to back: submit rate, end-to-end rate, submit → end p50/p95
   (server timestamps: created_at → finished_at);
3. CPU ms per task summed over every process CloudPivot started (utime+stime from /proc for the
   whole process trees, with the reaped children counted through their parents' cutime+cstime),
   over the N-task phase.
Figures, not assertions: this machine is shared and noisy.
"""

from __future__ import annotations

import datetime as dt
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
OPEN = ("PENDING", "SUBMITTING", "STARTING", "RUNNING", "RETRY_WAIT", "CANCELLING")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def processes() -> dict[int, tuple[int, int, str]]:
    """pid → (parent pid, utime+stime+cutime+cstime in ticks, command line) for every process."""
    table = {}
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
    return table


def tree_cpu(roots: list[int]) -> dict[str, float]:
    """CPU seconds of the trees under `roots`, by kind of process. A process reaped by a member of the tree is
    in its parent's cutime; a live or zombie one is counted itself: each CPU tick is counted once."""
    table = processes()
    children = defaultdict(list)
    for pid, (parent, _, _) in table.items():
        children[parent].append(pid)
    seen, stack = set(), [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            stack += children[pid]
    by_kind: dict[str, float] = defaultdict(float)
    for pid in seen:
        _, ticks, command = table[pid]
        by_kind[_kind(command)] += ticks / TICKS
    return by_kind


def _kind(command: str) -> str:
    for word, kind in (
        ("daphne", "web (daphne)"),
        ("qcluster", "workers (qcluster)"),
        ("cloudpivot_agent", "host agent + supervisors"),
        ("cloudpivot_runner", "runners"),
        ("serve", "serve"),
    ):
        if word in command:
            return kind
    return "programs and other"


def test_task_cost(tmp_path):
    count = int(os.environ.get("BENCH_TASKS", "100"))
    port = helpers.free_port()
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    env |= {
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base",
        "CLOUDPIVOT_VAR_DIR": str(tmp_path / "var"),
        "PORT": str(port),
        "CLOUDPIVOT_QUEUE_NAME": f"bench-{os.getpid()}",
        "CLOUDPIVOT_LOG_LEVEL": "WARNING",
    }
    log_path = tmp_path / "serve.log"
    log = log_path.open("w")  # a file, not a pipe: nobody would drain a pipe, and a full one blocks the servers
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

        def call(method, path="", body=None):
            return helpers.api_call(base, method, path, token, body, timeout=120)  # a loaded SQLite server is slow

        def run_one() -> float:
            started = time.monotonic()
            task = call("POST", body={"cloud": "local", "command": ["true"]})
            while call("GET", f"/{task['id']}")["state"] not in TERMINAL:
                time.sleep(0.01)
            return time.monotonic() - started

        run_one()  # warm-up: workers forked, the agent (where there is one) started
        time.sleep(2)
        idle = []
        for _ in range(10):
            idle.append(run_one())
            time.sleep(0.5)
        time.sleep(3)  # let the reconciler settle (cleanups) before the CPU window

        roots = [serve.pid] + _agent_pids(tmp_path / "var" / "runs")
        before = tree_cpu(roots)
        began = time.monotonic()
        ids = [call("POST", body={"cloud": "local", "command": ["true"]})["id"] for _ in range(count)]
        submitted = time.monotonic() - began
        while call("GET", "?limit=1&" + "&".join(f"state={s}" for s in OPEN))["results"]:
            time.sleep(0.25)
        ended = time.monotonic() - began
        after = tree_cpu(roots + _agent_pids(tmp_path / "var" / "runs"))

        rows = {t["id"]: t for t in call("GET", "?limit=500")["results"]}
        tasks = [rows[i] for i in ids if i in rows]
        latencies = [
            (dt.datetime.fromisoformat(t["finished_at"]) - dt.datetime.fromisoformat(t["created_at"])).total_seconds()
            for t in tasks
            if t["finished_at"]
        ]
        states = defaultdict(int)
        for task in tasks:
            states[task["state"]] += 1
        cpu = {kind: after.get(kind, 0) - before.get(kind, 0) for kind in set(before) | set(after)}
        total = sum(cpu.values())
        print(f"\n=== Task cost, embedded default, {count} × ['true'] through the REST API, one sequential client")
        print(f"  states: {dict(states)}")
        print(f"  submit rate:                {count / submitted:7.1f} tasks/s")
        print(f"  end-to-end rate:            {count / ended:7.1f} tasks/s")
        p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
        print(f"  submit → end p50 / p95:     {p50:7.2f} s / {p95:.2f} s")
        print(f"  idle: one task, submit → SUCCEEDED p50: {percentile(idle, 0.5):.3f} s (10 runs, client-observed)")
        print(f"  CPU per task, all processes: {1000 * total / count:7.1f} ms")
        for kind in sorted(cpu, key=lambda k: -cpu[k]):
            print(f"    {kind:28s} {1000 * cpu[kind] / count:7.1f} ms")
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
