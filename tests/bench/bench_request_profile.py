"""In-process CPU per REST request (issue 11, item 4): a submit, a task read and a log follower's read
(GET /api/v1/tasks/{id}/logs?offset=, as `cloudpivot task logs -f` polls it) through the bearer-token stack.

Runs each request BENCH_REQUESTS times (default 300) through the routed test client (the middleware stack
uvicorn serves a bearer-token call with) inside the test process, reports CPU ms per request
(`time.process_time`), and with BENCH_PROFILE=1 prints the top of a cProfile by cumulative and own time.
No server, no network: what is left is the cost of Django, DRF and the view. SQLite, or PostgreSQL with
DATABASE_URL.
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.builders import hello_spec, running, write_log

N = int(os.environ.get("BENCH_REQUESTS", "300"))


def measure(label: str, call) -> None:
    for _ in range(20):  # warm caches, imports and the connection
        call()
    started = time.process_time()
    for _ in range(N):
        call()
    per_request = (time.process_time() - started) / N * 1000
    print(f"\n{label}: {per_request:.2f} ms CPU per request ({N} requests, in process)")
    if os.environ.get("BENCH_PROFILE"):
        # BENCH_PROFILE_CPU=1: CPU time only (time.process_time), not the wait for the database
        profile = cProfile.Profile(time.process_time) if os.environ.get("BENCH_PROFILE_CPU") else cProfile.Profile()
        profile.enable()
        for _ in range(N):
            call()
        profile.disable()
        if os.environ.get("BENCH_PROFILE_OUT"):
            # one file per measured request: <BENCH_PROFILE_OUT>.<first word of the label>-<its path's length>
            profile.dump_stats(f"{os.environ['BENCH_PROFILE_OUT']}.{label.split()[0]}-{len(label)}")
        stats = pstats.Stats(profile)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_callees(
            "task_submit|views.py.*create|_send_each|run_and_clear_commit_hooks|audit.py.*__call__|retrieve|authenticate"
        )


@pytest.mark.django_db(transaction=True)
def test_request_profile(api, world):
    client = api("bob")
    body = json.dumps(hello_spec(name="bench"))

    def submit():
        response = client.post("/api/v1/tasks", data=body, content_type="application/json")
        assert response.status_code == 201, response.content
        return response

    task_id = submit().json()["id"]
    with CaptureQueriesContext(connection) as queries:
        submit()
    print(f"\nPOST /api/v1/tasks (submit): {len(queries)} statements")
    for query in queries.captured_queries:
        print(f"    {float(query['time']) * 1000:6.2f} ms  {query['sql'][:160]}")

    def read():
        response = client.get(f"/api/v1/tasks/{task_id}")
        assert response.status_code == 200, response.content

    measure("POST /api/v1/tasks (submit)", submit)
    measure("GET /api/v1/tasks/{id}", read)


@pytest.mark.django_db(transaction=True)
def test_agent_sync_profile(world):
    """The host agent's sync, as a submit's doorbell makes it come: a new long-poll with one attempt held
    (wait=0 here, so it answers at once) and one that admits and hands out a task submitted just before."""
    from rest_framework.test import APIClient

    from cloudpivot import credentials
    from clusters.backends.local import agent_name, connection_runs_dir
    from tasks.services.submission import task_submit

    name = agent_name(connection_runs_dir(world.local))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {credentials.agent_credential(name=name)}")
    held: list[str] = []

    def sync(**extra) -> dict:
        body = {"protocol": 2, "agent": {"name": name, "boot_id": "b", "pid": 1}, "known": held, "wait": 0, **extra}
        response = client.post("/runner/v2/sync", body, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    task_submit(user=world.bob, document=hello_spec(command=["sleep", "600"]))
    held.extend(a["attempt"] for a in sync()["assignments"])
    measure("POST /runner/v2/sync (one attempt held, nothing new)", sync)

    batch = int(os.environ.get("BENCH_BATCH", "1"))

    def task_cycle() -> None:
        """What the agent's requests cost for BENCH_BATCH tasks submitted together (default 1): the woken
        long-poll that admits and hands them out, the new long-poll, the report of their starts and exits,
        and the confirmation of their cleanup. Divide by BENCH_BATCH for the cost per task."""
        for _ in range(batch):
            task_submit(user=world.bob, document=hello_spec(command=["true"]))
        names = [assignment["attempt"] for assignment in sync()["assignments"]]
        assert len(names) == batch
        held.extend(names)
        sync()
        now = "2026-12-03T09:00:00Z"
        events = [
            {"seq": 1, "type": "started", "time": now, "data": {"pid": 1}},
            {"seq": 2, "type": "exited", "time": now, "data": {"exit_code": 0}},
        ]
        sync(attempts=[{"attempt": name, "events": events, "logs": []} for name in names])
        for name in names:
            held.remove(name)
        sync(cleaned=names)

    measure(f"{batch} task(s) submitted and their agent syncs: handout, poll, report, cleanup", task_cycle)


def test_log_follower_profile(api, world):
    """A running task's log of 600 small chunks (an agent batch's few lines each); the follower reads at the end:
    the last chunk's bytes (the steady state of a follower), and nothing new (the poll that finds nothing)."""
    client = api("bob")
    task, attempt = running(world.bob)
    for n in range(600):
        write_log(attempt, b"%.6f 0 %d %s\n" % (time.time(), n, b"x" * 60))
    attempt.refresh_from_db()
    last = attempt.log_bytes - 78
    paths = {
        "GET …/logs?offset=<last chunk>": f"/api/v1/tasks/{task.pk}/logs?offset={last}",
        "GET …/logs?offset=<end> (nothing new)": f"/api/v1/tasks/{task.pk}/logs?offset={attempt.log_bytes}",
    }
    for label, path in paths.items():

        def read(path=path):
            response = client.get(path)
            assert response.status_code == 200, response.content

        with CaptureQueriesContext(connection) as queries:
            read()
        print(f"\n{label}: {len(queries)} queries")
        if os.environ.get("BENCH_PROFILE"):
            for query in queries.captured_queries:
                print("   ", query["sql"][:300])
        measure(label, read)


@pytest.mark.django_db(transaction=True)
def test_streaming_sync_profile(world):
    """The host agent's report while BENCH_STREAM_ATTEMPTS programs (default 100) print steadily: every attempt
    held, each with one small log piece (a few lines) and no event, as in `make bench-streaming`'s steady state.
    CPU per sync, and the SQL it sends (BENCH_PROFILE=1: the statements and a cProfile)."""
    import base64

    from rest_framework.test import APIClient

    from cloudpivot import credentials
    from clusters.backends.local import agent_name, connection_runs_dir
    from tasks.services.submission import task_submit

    count = int(os.environ.get("BENCH_STREAM_ATTEMPTS", "100"))
    name = agent_name(connection_runs_dir(world.local))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {credentials.agent_credential(name=name)}")
    agent = {"name": name, "boot_id": "b", "pid": 1}

    def sync(body: dict) -> dict:
        response = client.post("/runner/v2/sync", {"protocol": 2, "agent": agent, "wait": 0, **body}, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    for _ in range(count):
        task_submit(user=world.bob, document=hello_spec(command=["sleep", "600"]))
    held: list[str] = []
    while len(held) < count:
        held += [a["attempt"] for a in sync({"known": held})["assignments"]]
    now = "2026-12-03T09:00:00Z"
    started = [{"attempt": n, "events": [{"seq": 1, "type": "started", "time": now}], "logs": []} for n in held]
    sync({"known": held, "attempts": started})
    offsets = dict.fromkeys(held, 0)

    def report() -> None:
        pieces = []
        for attempt in held:
            data = b"".join(b"%.6f 0 %d %s\n" % (time.time(), n, b"x" * 40) for n in range(4))
            logs = [{"stream": "stdout", "offset": offsets[attempt], "data": base64.b64encode(data).decode()}]
            pieces.append({"attempt": attempt, "events": [], "logs": logs})
            offsets[attempt] += len(data)
        sync({"known": held, "attempts": pieces})

    with CaptureQueriesContext(connection) as queries:
        report()
    print(f"\nPOST /runner/v2/sync, {count} attempts streaming (one log piece each): {len(queries)} queries")
    if os.environ.get("BENCH_PROFILE"):
        for query in queries.captured_queries:
            print(f"    {float(query['time']) * 1000:6.2f} ms  {query['sql'][:160]}")
    measure(f"POST /runner/v2/sync, {count} attempts streaming", report)
