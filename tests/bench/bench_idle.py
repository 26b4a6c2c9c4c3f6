"""What CloudPivot costs when nothing runs (issue 11): `make bench BENCH_ARGS="-k idle"` (BENCH_IDLE_SECONDS=N).

Starts CloudPivot as `make run` does (served.start: `manage.py serve --bootstrap`, uvicorn, the
qcluster and the host agent) in a fresh var dir, on the embedded default (or on a fresh PostgreSQL
database and Redis when DATABASE_URL and REDIS_URL are set), runs one task so every process has done
its start-up work (workers forked, the agent connected), lets it settle, then sums the CPU of every
CloudPivot process over N seconds (default 60) of doing nothing (served.tree_cpu: the serve process
tree and the detached host agent's). It prints the figure as a share of one core, by kind of process.
The target is under 2 %.

The scheduled jobs (metrics every minute, health every 5 minutes …) run in this window as they would
on any idle installation, so they are in the figure. A figure, not an assertion: the machine is shared.
"""

from __future__ import annotations

import os
import time

from tests.bench import served as serving

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "UNKNOWN")


def test_idle(tmp_path):
    seconds = float(os.environ.get("BENCH_IDLE_SECONDS", "60"))
    server = serving.start(tmp_path, scale_out=serving.scale_out_requested(), label="idle")
    client = serving.KeepAliveClient(server.url, server.token)
    try:
        task = client.call("POST", "/api/v1/tasks", {"cloud": "local", "command": ["true"]})
        deadline = time.monotonic() + 60
        while client.call("GET", f"/api/v1/tasks/{task['id']}")["state"] not in TERMINAL:
            assert time.monotonic() < deadline, "the warm-up task did not finish within 60 s"
            time.sleep(0.1)
        client.close()  # an open keep-alive connection is no part of an idle installation
        time.sleep(10)  # cleanups, the task's last reports, the first schedules: then nothing is left to do

        roots = server.roots()
        before = serving.tree_cpu(roots)
        began = time.monotonic()
        time.sleep(seconds)
        cpu = serving.cpu_since(before, serving.tree_cpu(roots))
        elapsed = time.monotonic() - began
        memory = serving.tree_memory(server.roots())
    finally:
        client.close()
        serving.stop(server)
    total = sum(cpu.values())
    print(f"\n=== Idle cost, {server.database}: CPU of every CloudPivot process over {elapsed:.0f} s doing nothing")
    print(f"  all processes: {100 * total / elapsed:5.2f} % of one core ({1000 * total:.0f} ms CPU)")
    for kind in sorted(cpu, key=lambda k: -cpu[k]):
        print(f"    {kind:26s} {100 * cpu[kind] / elapsed:5.2f} %")
    processes = sum(count for count, _ in memory.values())
    print(f"  memory, proportional (PSS): {sum(mb for _, mb in memory.values()):.0f} MB over {processes} processes")
    for kind in sorted(memory, key=lambda k: -memory[k][1]):
        count, mb = memory[kind]
        print(f"    {kind:26s} {mb:6.0f} MB  ({count} process{'es' if count > 1 else ''})")
