"""The task list at scale (issue 11): `make bench-task-list` (set DATABASE_URL and REDIS_URL for PostgreSQL).

100,000 tasks (BENCH_LIST_TASKS) bulk-inserted over 5 projects and their users. In process: statements and CPU
per GET /api/v1/tasks (BENCH_EXPLAIN=1: the plan of the page's statement as sent; BENCH_PROFILE=1: a CPU
profile). Over HTTP against a real web server: the default page, state filters, a project filter and the second
page by cursor, as a member of one project, of all five, and as staff, p50/p95 of 20 requests each. Then the
issue's figure, the list while tasks stream (`while_streaming`; BENCH_STREAM_TASKS=100 for the issue's 100,
BENCH_LIST_LOAD=0 skips it). Target: p95 < 100 ms. Figures, not assertions: this machine is shared and noisy.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tasks.models import Task
from tasks.services.submission import task_submit
from tests import helpers
from tests.bench import listing, served, streaming_load
from tests.builders import hello_spec

pytestmark = pytest.mark.django_db(transaction=True)


class Statements:
    """Every statement a request sends, with its SQL and parameters (connection.execute_wrapper: Django's own
    query log is emptied by request_started, so CaptureQueriesContext counts none for a request)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def __call__(self, execute, sql, params, many, context):
        self.sent.append((sql, params))
        return execute(sql, params, many, context)


def in_process(seeded: dict) -> None:
    """Statements and server CPU per request, without HTTP (median of 10); BENCH_EXPLAIN=1: the plan of the
    page's statement exactly as the request sent it; BENCH_PROFILE=1: where the CPU goes (CPU time only)."""
    print("  in process (no HTTP): statements and CPU per request (median of 10)")
    for who, token in seeded["tokens"].items():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        for label, path in listing.QUERIES[:5]:
            path = path.format(project=seeded["project"])
            client.get(path)
            statements = Statements()
            with connection.execute_wrapper(statements):
                assert client.get(path).status_code == 200
            cpu, wall = [], []
            for _ in range(10):
                began, began_wall = time.process_time(), time.perf_counter()
                client.get(path)
                cpu.append(time.process_time() - began)
                wall.append(time.perf_counter() - began_wall)
            print(
                f"    {who:20s} {label:30s} {len(statements.sent):2d} statements, CPU {1000 * sorted(cpu)[5]:5.1f} ms,"
                f" wall {1000 * sorted(wall)[5]:5.1f} ms"
            )
            if os.environ.get("BENCH_EXPLAIN") and label in ("default page (50)", "state=PENDING (rare)"):
                explain(statements.sent)
    if os.environ.get("BENCH_PROFILE"):
        import cProfile
        import pstats

        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {seeded['tokens']['one project (bob)']}")
        profile = cProfile.Profile(time.process_time)  # CPU only, not the wait for the database
        profile.runcall(lambda: [client.get("/api/v1/tasks") for _ in range(20)])
        pstats.Stats(profile).sort_stats("cumulative").print_stats(35)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def explain(sent: list[tuple[str, Any]]) -> None:
    """EXPLAIN (ANALYZE on PostgreSQL) of the statement that read the page: the one on tasks_task with a LIMIT."""
    for sql, params in sent:
        if "tasks_task" in sql and "LIMIT" in sql.upper() and sql.lstrip().upper().startswith("SELECT"):
            prefix = "EXPLAIN (ANALYZE, BUFFERS) " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
            with connection.cursor() as cursor:
                cursor.execute(prefix + sql, params)
                plan = "\n".join("      " + " ".join(str(c) for c in row) for row in cursor.fetchall())
            print(f"      statement: {sql[:300]}{'…' if len(sql) > 300 else ''}\n{plan}")
            return


@pytest.fixture
def agents_web(worker, settings, tmp_path):
    """With Redis, the host agents report to a web process of their own, as `manage.py serve` sets it up on
    PostgreSQL (BENCH_AGENT_WEB=0: to the list's process, as on the embedded default). Set before anything
    starts the agent: a running agent keeps the URL it was started with."""
    if os.environ.get("BENCH_AGENT_WEB", "1" if served.scale_out_requested() else "0") == "0":
        yield None
        return
    port = helpers.free_port()
    env = {**worker.env, "PORT": str(port), "CLOUDPIVOT_RUNNER_SERVER_URL": f"http://127.0.0.1:{port}"}
    process = helpers.start_daphne(port=port, env=env, log=tmp_path / "agents-web.log")
    settings.AGENT_SERVER_URL = f"http://127.0.0.1:{port}"
    yield process
    helpers.stop_process_group(process)


def test_task_list_with_100k_tasks(worker, agents_web, world, tmp_path):
    total = int(os.environ.get("BENCH_LIST_TASKS", "100000"))
    print(f"\n=== Task list API with {total:,} tasks on {connection.vendor}; load {os.getloadavg()}")
    seeded = listing.seed(world, total, tmp_path / "seeded-runs")
    print(f"  seeded in {seeded['seconds']:.0f} s")
    in_process(seeded)
    rows = listing.measure(worker.url, seeded["tokens"], seeded["project"])
    listing.print_rows("idle (no tasks running), over HTTP, one keep-alive connection:", rows)
    if os.environ.get("BENCH_LIST_LOAD", "1") != "0":
        while_streaming(worker, agents_web, world)
    # The `live` fixture's teardown kills the agent and the programs still printing.


def while_streaming(worker, agents_web, world) -> None:
    """The issue's figure: one client asks for the first page (a one-project member) every BENCH_LIST_GAP s
    (0.25) for BENCH_LIST_SECONDS (30) while BENCH_STREAM_TASKS tasks (20; the issue's 100) each print
    BENCH_STREAM_RATE lines/s (20) through the host agent (to its own web process with Redis, `agents_web`:
    the list's web process CPU per request is then the list's alone)."""
    count = int(os.environ.get("BENCH_STREAM_TASKS", "20"))
    rate = float(os.environ.get("BENCH_STREAM_RATE", "20"))
    seconds = float(os.environ.get("BENCH_LIST_SECONDS", "30"))
    gap = float(os.environ.get("BENCH_LIST_GAP", "0.25"))
    start_at = time.time() + 10 + 0.2 * count
    program = {"rate": rate, "seconds": seconds + 15, "start_at": start_at}
    tasks = [
        task_submit(user=world.bob, document=hello_spec(command=streaming_load.command(index=i, **program)))[0]
        for i in range(count)
    ]
    helpers.wait_for(
        lambda: Task.objects.filter(pk__in=[t.pk for t in tasks], state="RUNNING").count() == count,
        timeout=120,
        interval=0.5,
        what=f"{count} streaming tasks to run",
    )
    time.sleep(max(0.0, start_at + 3 - time.time()))
    roots = {"list's web": [worker.process.pid], "agents' web": [agents_web.pid] if agents_web else []}
    before = {who: sum(served.tree_cpu(pids).values()) for who, pids in roots.items() if pids}
    lister = listing.Lister(worker.url, world.tokens["bob"], gap)
    lister.start()
    time.sleep(seconds)
    lister.stop.set()
    lister.join(timeout=30)
    used = {who: sum(served.tree_cpu(roots[who]).values()) - cpu for who, cpu in before.items()}
    times = lister.times
    p50, p95, p99 = (1000 * listing.percentile(times, q) for q in (0.5, 0.95, 0.99))
    where = "their own web process" if agents_web else "the list's web process"
    print(
        f"  while {count} tasks print {rate:g} lines/s each through the host agent (reporting to {where}), "
        f"GET /api/v1/tasks (one project, default page) every {gap} s for {seconds:g} s:\n"
        f"    p50 {p50:.0f} ms, p95 {p95:.0f} ms, p99 {p99:.0f} ms, max {1000 * max(times, default=0):.0f} ms"
        f" over {len(times)} requests ({lister.errors} failed)"
    )
    for who, cpu in used.items():
        alone = who == "list's web" and agents_web is not None
        per = f", {1000 * cpu / max(1, len(times)):.1f} ms per list request" if alone else ""
        print(f"    CPU of the {who} process: {100 * cpu / seconds:.1f} % of a core{per}")
    print(f"  load average at the end {os.getloadavg()}")
