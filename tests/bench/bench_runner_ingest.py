"""Runner ingestion benchmark (issues 3 and 11): `make bench-ingest` (set DATABASE_URL and REDIS_URL).

`-k v2` runs the batched protocol alone (issue 11's ≥ 2,000 events/s): host agents with their agent
credential post POST /runner/v2/sync batches of events and log chunks for many attempts at once on a
real Daphne; beside it the same batches applied in process (no HTTP) with the queries they take.
BENCH_SECONDS (default 8) is how long each phase posts.

`-k v1` prints, in one run on this machine:
1. the reference: raw single-row INSERTs per second into the database (autocommit);
2. events/s acknowledged: 50 concurrent clients with real per-attempt credentials posting
   progress events to /runner/v1/events on a real Daphne, and beside it on two Daphne
   processes sharing one port (`serve --web-processes 2`);
3. log ingestion: 50 real Runners whose programs print timestamped lines; MB/s stored and
   p50/p95 latency from a line printed to that line readable through the API.
Figures, not assertions: this machine is shared and noisy.
"""

from __future__ import annotations

import base64
import os
import threading
import time

import pytest
from django.db import connection, transaction

from cloudpivot import credentials
from clusters.backends.local import agent_name, connection_runs_dir
from clusters.models import CloudConnection
from tasks.models import LogChunk, Task
from tasks.services import reconcile_pass
from tasks.services.attempts import attempt_create
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests import helpers
from tests.bench import served as serving
from tests.builders import hello_spec, v1_runner_client

pytestmark = pytest.mark.django_db(transaction=True)
RUNNERS = 50


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def reference_inserts(seconds: float = 3.0) -> float:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE bench_ref (id integer, data bytea)"
            if connection.vendor == "postgresql"
            else "CREATE TEMP TABLE bench_ref (id integer, data blob)"
        )
        count, deadline = 0, time.monotonic() + seconds
        started = time.monotonic()
        while time.monotonic() < deadline:
            with transaction.atomic():
                cursor.execute("INSERT INTO bench_ref (id, data) VALUES (%s, %s)", [count, b"x" * 100])
            count += 1
        cursor.execute("DROP TABLE bench_ref")
    return count / (time.monotonic() - started)


def events_per_second(url: str, world, monkeypatch, seconds: float = 8.0) -> tuple[float, float]:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)  # no Runner starts: this phase plays the Runners itself
    tokens = []
    world.local.dispatch_enabled = False
    world.local.save()
    for _ in range(RUNNERS):
        task, _ = task_submit(user=world.bob, document=hello_spec())
        with transaction.atomic():
            attempt = attempt_create(task=task_lock(task.pk), reason="bench")
        v1_runner_client(attempt)  # v1 answers only attempts of before its retirement (runner_api/protocol_v1.py)
        tokens.append(
            credentials.runner_credential(external_name=attempt.external_name, nonce=attempt.credential_nonce)
        )
    world.local.dispatch_enabled = True
    world.local.save()
    monkeypatch.setattr(Conf, "SYNC", True)
    acked, latencies = [0] * RUNNERS, []
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        seq = 0
        while time.monotonic() < deadline:
            batch = [
                {"seq": seq + i + 1, "type": "progress", "data": {"message": f"step {seq + i}"}} for i in range(10)
            ]
            started = time.monotonic()
            body = helpers.api_call(url, "POST", "/runner/v1/events", tokens[index], {"events": batch})
            latencies.append(time.monotonic() - started)
            seq = body["acked_seq"]
            acked[index] = seq

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(RUNNERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(acked) / (time.monotonic() - started), percentile(latencies, 0.95)


PROGRAM = """
import sys, time
end = time.time() + {seconds}
while time.time() < end:
    sys.stdout.write("%.6f %s\\n" % (time.time(), "x" * 180)); sys.stdout.flush()
    time.sleep({pause})
"""


def log_ingestion(live, world, seconds: float = 15.0, pause: float = 0.05) -> dict[str, float]:
    tasks = [
        task_submit(
            user=world.bob, document=hello_spec(command=["python3", "-c", PROGRAM.format(seconds=seconds, pause=pause)])
        )[0]
        for _ in range(RUNNERS)
    ]
    latencies: list[float] = []
    stop = threading.Event()

    def follow(task: Task) -> None:
        offset, pending = 0, b""
        while not stop.is_set():
            try:
                page = helpers.api_call(
                    live.url, "GET", f"/api/v1/tasks/{task.pk}/logs?offset={offset}", world.tokens["bob"]
                )
            except OSError:  # a slow answer under load: ask again, the offset makes it lossless
                continue
            now = time.time()
            pending += page["data"].encode()
            offset = page["next_offset"]
            *lines, pending = pending.split(b"\n")
            latencies.extend(now - float(line.split(b" ", 1)[0]) for line in lines if line)
            time.sleep(0.25)

    followers = [threading.Thread(target=follow, args=(task,), daemon=True) for task in tasks[:10]]
    started = time.monotonic()
    reconcile_pass()  # admits and starts all 50 (jobs inline)
    for thread in followers:
        thread.start()
    helpers.wait_for(
        lambda: (
            reconcile_pass() is not None
            and not Task.objects.exclude(state__in=["SUCCEEDED", "FAILED", "UNKNOWN"])
            .filter(pk__in=[t.pk for t in tasks])
            .exists()
        ),
        timeout=seconds + 120,
        interval=0.5,
        what="all programs to finish",
    )
    elapsed = time.monotonic() - started
    stop.set()
    stored = sum(len(bytes(data)) for data in LogChunk.objects.filter(task__in=tasks).values_list("data", flat=True))
    states = Task.objects.filter(pk__in=[t.pk for t in tasks]).values_list("state", flat=True)
    return {
        "bytes": stored,
        "mb_per_s": stored / elapsed / 1e6,
        "elapsed": elapsed,
        "p50": percentile(latencies, 0.5),
        "p95": percentile(latencies, 0.95),
        "lines_measured": len(latencies),
        "succeeded": sum(1 for s in states if s == "SUCCEEDED"),
    }


def test_v1_runner_ingestion(live, world, settings, monkeypatch):
    settings.RUNNER_HEARTBEAT_SECONDS = 1.0  # the default
    vendor = connection.vendor
    print(f"\n=== Runner ingestion benchmark on {vendor}, {RUNNERS} concurrent Runners, one Daphne process")
    ref = reference_inserts()
    print(f"reference: raw single-row INSERT+COMMIT          {ref:10.0f} rows/s")
    rate, p95 = events_per_second(live.url, world, monkeypatch)
    print(f"runner events acknowledged (batches of 10)      {rate:10.0f} events/s   (request p95 {p95 * 1000:.0f} ms)")
    print(f"  ratio events/s to raw inserts/s               {rate / ref:10.2f}")
    port = helpers.free_port()
    pair = helpers.start_daphnes(port=port, env=live.env, log=live.log, processes=2)
    try:
        rate2, p95_2 = events_per_second(f"http://127.0.0.1:{port}", world, monkeypatch)
    finally:
        for process in pair:
            helpers.stop_process_group(process)
    print(f"  two Daphne processes on one port              {rate2:10.0f} events/s   (p95 {p95_2 * 1000:.0f} ms)")
    print(f"  ratio two processes / one                     {rate2 / rate:10.2f}")
    logs = log_ingestion(live, world)
    print(
        f"log ingestion: {logs['bytes'] / 1e6:.1f} MB in {logs['elapsed']:.1f} s = {logs['mb_per_s']:.2f} MB/s; "
        f"{logs['succeeded']}/{RUNNERS} tasks succeeded"
    )
    print(
        f"line printed → readable via API: p50 {logs['p50'] * 1000:.0f} ms, p95 {logs['p95'] * 1000:.0f} ms "
        f"over {logs['lines_measured']} lines"
    )


# ------------------------------------------------------------------------------------ protocol v2, batched
V2_EVENTS_PER_ATTEMPT = 10  # per batch
V2_LOG_BYTES_PER_ATTEMPT = 200  # per batch: one chunk
V2_SECONDS = float(os.environ.get("BENCH_SECONDS", "8"))


class Agent:
    """One host: a `local` connection of its own (its own runs dir, so its own agent name and credential)."""

    def __init__(self, world, index: int, attempts: int, tmp_path) -> None:
        runs_dir = tmp_path / f"host-{index}"
        self.connection = CloudConnection.objects.create(
            cloud_id=f"host-{index}", backend="local", options={"runs_dir": str(runs_dir)}, dispatch_enabled=False
        )
        self.connection.projects.add(world.alpha)
        self.name = agent_name(connection_runs_dir(self.connection))
        self.token = credentials.agent_credential(name=self.name)
        self.attempts: list[str] = []
        for _ in range(attempts):
            task, _ = task_submit(user=world.bob, document=hello_spec(cloud=self.connection.cloud_id))
            with transaction.atomic():
                self.attempts.append(attempt_create(task=task_lock(task.pk), reason="bench").external_name)
        self.seq = dict.fromkeys(self.attempts, 0)
        self.offset = dict.fromkeys(self.attempts, 0)

    def body(self, *, with_reports: bool = True) -> dict:
        reports = []
        for name in self.attempts if with_reports else ():
            seq = self.seq[name]
            events = [
                {
                    "seq": seq + i + 1,
                    "type": "started" if seq + i == 0 else "progress",
                    "data": {"message": f"s{seq + i}"},
                }
                for i in range(V2_EVENTS_PER_ATTEMPT)
            ]
            line = (b"%.6f " % time.time()).ljust(V2_LOG_BYTES_PER_ATTEMPT - 1, b"x") + b"\n"
            logs = [{"stream": "stdout", "offset": self.offset[name], "data": base64.b64encode(line).decode()}]
            reports.append({"attempt": name, "events": events, "logs": logs})
        return {
            "protocol": 2,
            "agent": {"name": self.name, "boot_id": "bench", "version": "bench", "pid": os.getpid()},
            "known": self.attempts,
            "stopping": [],
            "attempts": reports,
            "wait": 0,
        }

    def take(self, answer: dict) -> tuple[int, int]:
        """Record where the server stands; return (events, bytes) newly acknowledged."""
        events = data = 0
        for name, part in answer["attempts"].items():
            if name in self.seq and "acked_seq" in part:
                events += part["acked_seq"] - self.seq[name]
                data += part["log_offsets"]["stdout"] - self.offset[name]
                self.seq[name], self.offset[name] = part["acked_seq"], part["log_offsets"]["stdout"]
        return events, data


def v2_over_http(url: str, agents: list[Agent], seconds: float) -> dict[str, float]:
    """Each agent posts its batches back to back (one request at a time, as an agent does) for `seconds`."""
    totals = {"events": 0, "bytes": 0, "requests": 0}
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(agent: Agent) -> None:
        while time.monotonic() < deadline:
            started = time.monotonic()
            answer = helpers.api_call(url, "POST", "/runner/v2/sync", agent.token, agent.body(), timeout=120)
            took = time.monotonic() - started
            events, data = agent.take(answer)
            with lock:
                latencies.append(took)
                totals["events"] += events
                totals["bytes"] += data
                totals["requests"] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=run, args=(agent,)) for agent in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    return {
        "events_per_s": totals["events"] / elapsed,
        "kb_per_s": totals["bytes"] / elapsed / 1e3,
        "requests_per_s": totals["requests"] / elapsed,
        "p50": percentile(latencies, 0.5),
        "p95": percentile(latencies, 0.95),
    }


def v2_in_process(agent: Agent, batches: int = 5) -> dict[str, float]:
    """The same batch applied without HTTP: the apply side's own cost, and its queries."""
    from django.db import connection as db
    from django.test.utils import CaptureQueriesContext

    from runner_api.serializers import SyncInputSerializer
    from runner_api.sync_scope import sync_scope
    from tasks.services.runner_sync import sync_apply

    times, queries, events = [], [], 0
    for _ in range(batches):
        serializer = SyncInputSerializer(data=agent.body())
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        with CaptureQueriesContext(db) as captured:
            started = time.perf_counter()
            scope = sync_scope(authorization=f"Bearer {agent.token}", claimed_agent=agent.name)
            answer = sync_apply(scope=scope, agent=data["agent"], known=data["known"], reports=data["attempts"])
            times.append(time.perf_counter() - started)
        queries.append(len(captured))
        events += agent.take(answer)[0]
    if os.environ.get("BENCH_PROFILE"):  # the last batch's slowest queries
        for query in sorted(captured.captured_queries, key=lambda q: -float(q["time"]))[:6]:
            print(f"    {float(query['time']) * 1000:7.1f} ms  {query['sql'][:150]}")
    return {
        "ms_per_batch": 1000 * sorted(times)[len(times) // 2],
        "queries_per_batch": sorted(queries)[len(queries) // 2],
        "events_per_s": events / sum(times),
    }


def server_cpu_seconds(process) -> float:
    """CPU time (user + system) of the web server process and its children so far."""
    return sum(serving.tree_cpu([process.pid]).values())


def empty_sync_cost(live, agent: Agent, calls: int = 100) -> dict[str, float]:
    """A heartbeat sync (the agent holds its attempts, reports nothing, no long-poll): the server's CPU per
    call, measured on the Daphne process, and the queries it takes (in process)."""
    from django.db import connection as db
    from django.test.utils import CaptureQueriesContext

    from runner_api.sync_scope import sync_scope
    from tasks.services.runner_sync import sync_apply

    body = agent.body(with_reports=False)
    helpers.api_call(live.url, "POST", "/runner/v2/sync", agent.token, body, timeout=60)  # warm
    cpu, started = server_cpu_seconds(live.process), time.monotonic()
    for _ in range(calls):
        helpers.api_call(live.url, "POST", "/runner/v2/sync", agent.token, body, timeout=60)
    elapsed = time.monotonic() - started
    cpu = server_cpu_seconds(live.process) - cpu
    with CaptureQueriesContext(db) as captured:
        scope = sync_scope(authorization=f"Bearer {agent.token}", claimed_agent=agent.name)
        sync_apply(scope=scope, agent=body["agent"], known=body["known"], reports=[])
    return {"cpu_ms": 1000 * cpu / calls, "wall_ms": 1000 * elapsed / calls, "queries": len(captured)}


def test_v2_batched_ingestion(live, world, tmp_path, monkeypatch):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)  # nothing runs the queued jobs: the benchmark plays the agents
    vendor = connection.vendor
    hosts, per_host = 4, 50
    agents = [Agent(world, i, per_host, tmp_path) for i in range(hosts)]
    for agent in agents:  # the hand-out: each agent takes its attempts (SUBMITTING → STARTING)
        helpers.api_call(live.url, "POST", "/runner/v2/sync", agent.token, agent.body(with_reports=False), timeout=60)
    print(f"\n=== Runner ingestion, protocol v2 (batched) on {vendor}, one Daphne; load {os.getloadavg()}")
    shape = f"{V2_EVENTS_PER_ATTEMPT} events + one {V2_LOG_BYTES_PER_ATTEMPT}-byte log chunk"
    print(f"  a batch: {per_host} attempts × ({shape})")
    if os.environ.get("BENCH_PROFILE"):  # where the apply side's time goes
        import cProfile
        import pstats

        profile = cProfile.Profile()
        alone = profile.runcall(v2_in_process, agents[0])
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
    else:
        alone = v2_in_process(agents[0])
    print(
        f"  apply side alone (in process, no HTTP): {alone['ms_per_batch']:.0f} ms and "
        f"{alone['queries_per_batch']} queries per batch = {alone['events_per_s']:,.0f} events/s"
    )
    empty = empty_sync_cost(live, agents[0])
    print(
        f"  an empty sync (heartbeat of {per_host} attempts, nothing to report): server CPU {empty['cpu_ms']:.1f} ms, "
        f"wall {empty['wall_ms']:.1f} ms per call (sequential), {empty['queries']} queries in process"
    )
    for count in (1, hosts):
        got = v2_over_http(live.url, agents[:count], V2_SECONDS)
        print(
            f"  {count} agent(s) posting back to back over HTTP:   {got['events_per_s']:8,.0f} events/s acknowledged, "
            f"{got['kb_per_s']:.1f} kB/s of log, {got['requests_per_s']:.1f} requests/s "
            f"(request p50 {got['p50'] * 1000:.0f} ms, p95 {got['p95'] * 1000:.0f} ms)"
        )
    print(f"  target (issue 11): ≥ 2,000 events/s; load at the end {os.getloadavg()}")
