"""Task sets beside Slurm's job arrays in the same run (issue 29): `make bench-sets`.

`BENCH_SHORT=1` for a quick run (a 1,000-element set accepted 10 times, a 200-element set run to its end);
otherwise the issue's sizes (10,000 elements accepted 20 times, 1,000 run). With DATABASE_URL and REDIS_URL it
measures the embedded default and then PostgreSQL + Redis.

CloudPivot is started as `make run` starts it (tests/bench/served.py) and driven by one keep-alive REST client:
1. accept: `POST /api/v1/task-sets` of N elements of `true` (`count`), and the same with `items` (one parameter
   object per element, substituted into the command), each cancelled at once (it is the acceptance that is
   measured, not the run of 10,000 tasks); the client's time from request to answer, p50/p95, a warm-up first;
2. finish: one set of M × `true` on `local`: from the request to the last element ended (the client's wall until
   it sees the set FINISHED, polling every 0.1 s, and the server's clock: the set's created_at → the latest
   finished_at of its elements);
3. CPU per element over the finish phase, every process CloudPivot runs (served.tree_cpu), by kind.
Then the Slurm peer (slurm_peer.measure_arrays: `epilog` profile, `sbatch --array=0-<N-1> --wrap true` timed until
sbatch returns, and an M-element array from submit to its last element in the job-completion log, the daemons'
CPU per element). Figures, not assertions: the machine is shared.
"""

from __future__ import annotations

import datetime as dt
import os
import time

from tests.bench import served as serving
from tests.bench import slurm_peer
from tests.bench.bench_task_cost import percentile

TEMPLATE = {"cloud": "local", "name": "bench", "command": ["true"]}


def settings_for_run() -> dict[str, int]:
    short = os.environ.get("BENCH_SHORT", "") not in ("", "0")
    return {
        "accept_size": int(os.environ.get("BENCH_SET_ACCEPT", "1000" if short else "10000")),
        "accept_reps": 10 if short else 20,
        "finish_size": int(os.environ.get("BENCH_SET_FINISH", "200" if short else "1000")),
    }


def accept_times(client: serving.KeepAliveClient, body: dict, reps: int) -> list[float]:
    """The client's seconds from the request to the answer of `reps` submissions of `body` (after one warm-up),
    each set cancelled at once and the next sent once nothing of it runs (each acceptance on a quiet system: the
    previous set's elements being made and cancelled are not what is measured)."""
    seconds = []
    for rep in range(reps + 1):
        began = time.monotonic()
        task_set = client.call("POST", "/api/v1/task-sets", body)
        took = time.monotonic() - began
        client.call("POST", f"/api/v1/task-sets/{task_set['id']}/cancel")
        if rep:
            seconds.append(took)
        wait_idle(client)
        time.sleep(0.2)
    return seconds


def wait_idle(client: serving.KeepAliveClient) -> None:
    """Until no task is open (the cancelled sets' elements have ended)."""
    open_states = ("PENDING", "SUBMITTING", "STARTING", "RUNNING", "RETRY_WAIT", "CANCELLING")
    query = "&".join(f"state={s}" for s in open_states)
    deadline = time.monotonic() + 300
    while client.call("GET", f"/api/v1/tasks?limit=1&{query}")["results"] and time.monotonic() < deadline:
        time.sleep(0.2)


def elements(client: serving.KeepAliveClient, set_id: str) -> list[dict]:
    rows, after = [], -1
    while True:
        page = client.call("GET", f"/api/v1/task-sets/{set_id}/tasks?limit=1000&after_index={after}")
        rows += page["elements"]
        if not page["has_more"]:
            return rows
        after = page["next_after_index"]


def measure_cloudpivot(tmp_path, *, scale_out: bool, accept_size: int, accept_reps: int, finish_size: int) -> dict:
    server = serving.start(tmp_path, scale_out=scale_out, label="sets-pg" if scale_out else "sets-sqlite")
    client = serving.KeepAliveClient(server.url, server.token)
    try:
        warm = client.call("POST", "/api/v1/task-sets", {"template": TEMPLATE, "count": 3})  # workers, agent
        while client.call("GET", f"/api/v1/task-sets/{warm['id']}")["state"] != "FINISHED":
            time.sleep(0.1)
        by_count = accept_times(client, {"template": TEMPLATE, "count": accept_size}, accept_reps)
        template = {**TEMPLATE, "command": ["echo", "{{x}}"]}
        items = [{"x": index} for index in range(accept_size)]
        by_items = accept_times(client, {"template": template, "items": items}, accept_reps)
        wait_idle(client)
        time.sleep(3)  # the reconciler's cleanups before the CPU window

        before = serving.tree_cpu(server.roots())
        began = time.monotonic()
        task_set = client.call("POST", "/api/v1/task-sets", {"template": TEMPLATE, "count": finish_size})
        while (task_set := client.call("GET", f"/api/v1/task-sets/{task_set['id']}"))["state"] != "FINISHED":
            time.sleep(0.1)
        wall = time.monotonic() - began
        after = serving.tree_cpu(server.roots())
        rows = elements(client, task_set["id"])
    finally:
        client.close()
        serving.stop(server)
    created = dt.datetime.fromisoformat(task_set["created_at"])
    ends = [dt.datetime.fromisoformat(row["finished_at"]) for row in rows if row["finished_at"]]
    states: dict[str, int] = {}
    for row in rows:
        states[row["state"]] = states.get(row["state"], 0) + 1
    cpu = serving.cpu_since(before, after)
    return {
        "database": server.database,
        "accept_count": by_count,
        "accept_items": by_items,
        "finish_wall_s": wall,
        "finish_server_s": (max(ends) - created).total_seconds() if ends else float("nan"),
        "states": states,
        "cpu_ms_per_element": 1000 * sum(cpu.values()) / finish_size,
        "cpu_by_kind": {kind: 1000 * value / finish_size for kind, value in cpu.items()},
    }


def print_figures(run: dict[str, int], ours: list[dict], slurm: dict | None, why_not: str) -> None:
    n, reps, m = run["accept_size"], run["accept_reps"], run["finish_size"]
    ms = lambda values, q: f"{1000 * percentile(values, q):7.1f}"  # noqa: E731
    print(f"\n=== Task sets beside Slurm job arrays: accept {n:,} elements ({reps} times; Slurm at most 10), "
          f"run {m:,} × ['true']")  # fmt: skip
    for o in ours:
        print(f"  {o['database']}:")
        print(f"    accept, count   p50 / p95 / max (ms) {ms(o['accept_count'], 0.5)} / {ms(o['accept_count'], 0.95)}"
              f" / {1000 * max(o['accept_count']):.1f}")  # fmt: skip
        print(f"    accept, items   p50 / p95 / max (ms) {ms(o['accept_items'], 0.5)} / {ms(o['accept_items'], 0.95)}"
              f" / {1000 * max(o['accept_items']):.1f}")  # fmt: skip
        print(
            f"    {m} elements: submit → last ended {o['finish_wall_s']:.2f} s (client), "
            f"{o['finish_server_s']:.2f} s (server clock); {m / o['finish_wall_s']:.1f} elements/s; {o['states']}"
        )
        print(f"    accept times, sorted (ms): count {sorted(round(1000 * x, 1) for x in o['accept_count'])}")
        print(f"                               items {sorted(round(1000 * x, 1) for x in o['accept_items'])}")
        print(f"    CPU per element, every process: {o['cpu_ms_per_element']:.1f} ms")
        for kind, value in sorted(o["cpu_by_kind"].items(), key=lambda item: -item[1]):
            print(f"        {kind:28s} {value:7.1f} ms")
    if not slurm:
        print(f"  Slurm: not measured: {why_not}")
    else:
        print("  Slurm 22.05 (epilog profile), same run:")
        print(f"    sbatch --array=0-{n - 1} returns p50 / p95 / max (ms) {ms(slurm['accept_s'], 0.5)} / "
              f"{ms(slurm['accept_s'], 0.95)} / {1000 * max(slurm['accept_s']):.1f}")  # fmt: skip
        print(f"    sbatch --array=0-{m - 1} --wrap true: submit → last ended {slurm['finish_s']:.2f} s; "
              f"{slurm['completed'] / slurm['finish_s']:.1f} jobs/s; {slurm['finish_states']}")  # fmt: skip
        print(f"    CPU per job, slurmctld + slurmd + munged and children: {slurm['cpu_ms_per_job']:.1f} ms")
        for o in ours:
            print(f"  {o['database']}: finish {slurm['finish_s'] / o['finish_wall_s']:.2f} × as fast as Slurm "
                  f"(target ≥ 2); CPU {o['cpu_ms_per_element'] / slurm['cpu_ms_per_job']:.2f} × Slurm's")  # fmt: skip
    print(f"  load average at the end: {os.getloadavg()}")


def test_sets(tmp_path):
    run = settings_for_run()
    print(f"\n(load average at the start: {os.getloadavg()})")
    ours = [measure_cloudpivot(tmp_path, scale_out=False, **run)]
    if serving.scale_out_requested():
        ours.append(measure_cloudpivot(tmp_path, scale_out=True, **run))
    why_not = slurm_peer.available()
    # at most 10 arrays of 10,000 accepted: each cancelled one stays 10,000 records in slurmctld for MinJobAge
    slurm = None if why_not else slurm_peer.measure_arrays(**{**run, "accept_reps": min(10, run["accept_reps"])})
    print_figures(run, ours, slurm, why_not)
