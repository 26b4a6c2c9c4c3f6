"""Runner ingestion benchmark (issue 3): `make bench` (set DATABASE_URL for PostgreSQL).

Prints, in one run on this machine:
1. the reference: raw single-row INSERTs per second into the database (autocommit);
2. events/s acknowledged: 50 concurrent clients with real per-attempt credentials posting
   progress events to /runner/v1/events on a real Daphne, and beside it on two Daphne
   processes sharing one port (`serve --web-processes 2`);
3. log ingestion: 50 real Runners whose programs print timestamped lines; MB/s stored and
   p50/p95 latency from a line printed to that line readable through the API.
Figures, not assertions: this machine is shared and noisy.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from cloudpivot import credentials
from tasks.models import LogChunk, Task
from tasks.services import reconcile_pass
from tasks.services.attempts import attempt_create
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec

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


def test_runner_ingestion(live, world, settings, monkeypatch):
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
