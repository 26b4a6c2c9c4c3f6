"""What the HTTP stack costs alone, beside a submit, in one run (issue 11): `make bench BENCH_ARGS="-k floor"`.

Starts CloudPivot as `make run` does (uvicorn ×1, the host agent, qcluster; SQLite, or a fresh PostgreSQL
database with DATABASE_URL and REDIS_URL) with tests/bench/floor_urls.py added to its URLs, and measures
with one sequential keep-alive client, BENCH_REQUESTS requests each (default 300): requests/s and CPU ms
per request in the web process (served.tree_cpu), and for the submit the CPU of every process too.
- GET /healthz: a bare Django view on the Runner API's one-middleware stack;
- GET /api/v1/_floor/bare: a bare Django view on the token API's stack;
- GET /api/v1/_floor/drf: an empty DRF view, bearer token checked;
- POST /api/v1/_floor/drf: the same with a JSON body parsed, and audited (one INSERT, as every API write);
- GET /api/v1/tasks/{id}, POST /api/v1/tasks (200 × ["true"], run by the host agent meanwhile).
The first four are the floor a submit cannot go below on this stack. Figures, not assertions.
"""

from __future__ import annotations

import os

from tests.bench import served as serving
from tests.bench.bench_request_cost import measure

SPEC = {"cloud": "local", "command": ["true"]}


def test_request_floor(tmp_path):
    requests = int(os.environ.get("BENCH_REQUESTS", "300"))
    redis = {"REDIS_URL": os.environ["REDIS_URL"]} if os.environ.get("REDIS_URL") else {}
    server = serving.start(
        tmp_path,
        scale_out=serving.scale_out_requested(),
        label="floor",
        extra_env={"DJANGO_SETTINGS_MODULE": "tests.bench.floor_settings", **redis},
    )
    rows = []
    try:
        client = serving.KeepAliveClient(server.url, server.token)
        task = client.call("POST", "/api/v1/tasks", SPEC)["id"]
        client.close()
        endpoints = {
            "GET /healthz (bare Django, machine stack)": lambda c, i: c.call("GET", "/healthz"),
            "GET bare Django view (token API stack)": lambda c, i: c.call("GET", "/api/v1/_floor/bare"),
            "GET empty DRF view (bearer token)": lambda c, i: c.call("GET", "/api/v1/_floor/drf"),
            "POST empty DRF view (bearer token, JSON, audited)": lambda c, i: c.call(
                "POST", "/api/v1/_floor/drf", SPEC
            ),
            "GET /api/v1/tasks/{id}": lambda c, i: c.call("GET", f"/api/v1/tasks/{task}"),
        }
        for name, call in endpoints.items():
            rate, cpu = measure(server, 1, requests, call)
            rows.append((name, rate, cpu, ""))
            print(f"  {name}: {rate:.0f}/s {cpu:.2f} ms", flush=True)
        before = serving.tree_cpu(server.roots())
        rate, cpu = measure(server, 1, requests, lambda c, i: c.call("POST", "/api/v1/tasks", SPEC))
        every = sum(serving.cpu_since(before, serving.tree_cpu(server.roots())).values()) * 1000 / requests
        rows.append(("POST /api/v1/tasks (submit; the agent runs them meanwhile)", rate, cpu, f"{every:.1f}"))
    finally:
        serving.stop(server)
    print(f"\n=== Request floor, {server.database}, uvicorn ×1, one sequential client, load {os.getloadavg()[0]:.1f}")
    print("| request | req/s | web CPU ms/req | every process while the requests ran, ms/req |")
    print("|---|---|---|---|")
    for name, rate, cpu, every in rows:
        print(f"| {name} | {rate:.0f} | {cpu:.2f} | {every} |")
