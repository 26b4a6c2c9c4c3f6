"""In-process CPU per REST request (issue 11, item 4): a submit and a task read through the bearer-token stack.

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

from tests.builders import hello_spec

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
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(N):
            call()
        profile.disable()
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

    def read():
        response = client.get(f"/api/v1/tasks/{task_id}")
        assert response.status_code == 200, response.content

    measure("POST /api/v1/tasks (submit)", submit)
    measure("GET /api/v1/tasks/{id}", read)
