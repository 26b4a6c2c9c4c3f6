"""What one trivial task costs (issue 11), beside Slurm in the same run: `make bench-task-cost`.

`BENCH_TASKS=N` (default 200, the issue's figure), `BENCH_SHORT=1` for a quick run (30 tasks, 5 idle runs).
With DATABASE_URL and REDIS_URL set it measures the embedded default and then PostgreSQL + Redis.

Starts CloudPivot as `make run` does (`manage.py serve --bootstrap`: uvicorn, qcluster and the host agent)
in a fresh var dir (and a fresh PostgreSQL database), then with one sequential REST client on one
keep-alive connection (as slurmrestd is driven):
1. one task on an idle system, 10 times: submit → SUCCEEDED as the client sees it (polling every 10 ms);
2. N × ["true"] submitted back to back: submit rate, end-to-end rate, submit → end p50/p95
   (server timestamps: created_at → finished_at);
3. CPU ms per task summed over every process CloudPivot started (served.tree_cpu: utime+stime from
   /proc for the whole process trees, reaped children through their parents' cutime+cstime), over the
   N-task phase, and by kind of process.
Then the Slurm peer (tests/bench/slurm_peer.py: Slurm 22.05, tuned `epilog` profile, slurmrestd, one
sequential client) runs the same N jobs and one-at-a-time jobs, and a table puts both side by side with
ratios. Without the peer it says why and prints CloudPivot's figures alone.
Figures, not assertions: this machine is shared and noisy.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import defaultdict

from tests.bench import served as serving
from tests.bench import slurm_peer

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "UNKNOWN")
OPEN = ("PENDING", "SUBMITTING", "STARTING", "RUNNING", "RETRY_WAIT", "CANCELLING")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def settings_for_run() -> dict[str, int]:
    short = os.environ.get("BENCH_SHORT", "") not in ("", "0")
    return {
        "count": int(os.environ.get("BENCH_TASKS", "30" if short else "200")),
        "idle_runs": 5 if short else 10,
    }


def measure_cloudpivot(tmp_path, *, scale_out: bool, count: int, idle_runs: int) -> dict:
    """One CloudPivot, started fresh, measured as the module docstring says."""
    server = serving.start(tmp_path, scale_out=scale_out, label="pg" if scale_out else "sqlite")
    client = serving.KeepAliveClient(server.url, server.token)
    base = "/api/v1/tasks"
    try:

        def run_one() -> float:
            started = time.monotonic()
            task = client.call("POST", base, {"cloud": "local", "command": ["true"]})
            while client.call("GET", f"{base}/{task['id']}")["state"] not in TERMINAL:
                time.sleep(0.01)
            return time.monotonic() - started

        run_one()  # warm-up: workers forked, the agent started
        time.sleep(2)
        idle = []
        for _ in range(idle_runs):
            idle.append(run_one())
            time.sleep(0.5)
        time.sleep(3)  # let the reconciler settle (cleanups) before the CPU window

        before = serving.tree_cpu(server.roots())
        began = time.monotonic()
        ids = [client.call("POST", base, {"cloud": "local", "command": ["true"]})["id"] for _ in range(count)]
        submitted = time.monotonic() - began
        open_filter = "&".join(f"state={s}" for s in OPEN)
        while client.call("GET", f"{base}?limit=1&{open_filter}")["results"]:
            time.sleep(0.1)
        ended = time.monotonic() - began
        after = serving.tree_cpu(server.roots())
        rows = {t["id"]: t for t in client.call("GET", f"{base}?limit=500")["results"]}
    finally:
        client.close()
        serving.stop(server)
    tasks = [rows[i] for i in ids if i in rows]
    latencies = [
        (dt.datetime.fromisoformat(t["finished_at"]) - dt.datetime.fromisoformat(t["created_at"])).total_seconds()
        for t in tasks
        if t["finished_at"]
    ]
    states: dict[str, int] = defaultdict(int)
    for task in tasks:
        states[task["state"]] += 1
    cpu = serving.cpu_since(before, after)
    return {
        "database": server.database,
        "states": dict(states),
        "submit_rate": count / submitted,
        "e2e_rate": count / ended,
        "submit_to_end_p50": percentile(latencies, 0.5),
        "submit_to_end_p95": percentile(latencies, 0.95),
        "idle_submit_to_end_p50": percentile(idle, 0.5),
        "cpu_ms_per_task": 1000 * sum(cpu.values()) / count,
        "cpu_by_kind": {kind: 1000 * value / count for kind, value in cpu.items()},
    }


ROWS = (  # (label, key, format, higher is better)
    ("submit rate (tasks|jobs/s)", "submit_rate", "{:8.1f}", True),
    ("end-to-end rate (tasks|jobs/s)", "e2e_rate", "{:8.1f}", True),
    ("submit → end p50 (s)", "submit_to_end_p50", "{:8.2f}", False),
    ("submit → end p95 (s)", "submit_to_end_p95", "{:8.2f}", False),
    ("idle: one task, submit → end p50 (s)", "idle_submit_to_end_p50", "{:8.3f}", False),
    ("CPU per task, all processes (ms)", "cpu_ms_per_task", "{:8.1f}", False),
)


def print_side_by_side(count: int, ours: list[dict], slurm: dict | None, why_not: str) -> None:
    print(f"\n=== Task cost: {count} × ['true'] on `local` via REST, one sequential keep-alive client")
    heads = [o["database"] for o in ours] + (["Slurm 22.05 epilog (slurmrestd)"] if slurm else [])
    ratio_head = " | ratio(s) ours/Slurm" if slurm else ""
    print(f"  {'figure':38s}" + "".join(f" | {h[:30]:>30s}" for h in heads) + ratio_head)
    for label, key, fmt, higher_better in ROWS:
        cells = [fmt.format(o[key]) for o in ours]
        line = f"  {label:38s}" + "".join(f" | {c:>30s}" for c in cells)
        if slurm:
            theirs = slurm.get(key.replace("cpu_ms_per_task", "cpu_ms_per_job"))
            line += f" | {fmt.format(theirs):>30s}"
            if theirs:
                ratios = ", ".join(f"{o[key] / theirs:.2f}" for o in ours)
                line += f" | {ratios} ({'≥ 1' if higher_better else '≤ 1'} is as good as Slurm)"
        print(line)
    for o in ours:
        print(f"  {o['database']}: states {o['states']}; CPU per task by process kind:")
        for kind, ms in sorted(o["cpu_by_kind"].items(), key=lambda item: -item[1]):
            print(f"      {kind:28s} {ms:7.1f} ms")
    if slurm:
        print(f"  Slurm: {slurm['completed']} jobs completed; CPU = slurmctld, slurmd, slurmrestd, munged + children")
    else:
        print(f"  Slurm: not measured: {why_not}")
    print(f"  load average at the end: {os.getloadavg()}")


def test_task_cost(tmp_path):
    run = settings_for_run()
    print(f"\n(load average at the start: {os.getloadavg()})")
    ours = [measure_cloudpivot(tmp_path, scale_out=False, **run)]
    if serving.scale_out_requested():
        ours.append(measure_cloudpivot(tmp_path, scale_out=True, **run))
    why_not = slurm_peer.available()
    slurm = None if why_not else slurm_peer.measure(n=run["count"], serial_n=run["idle_runs"])
    print_side_by_side(run["count"], ours, slurm, why_not)
