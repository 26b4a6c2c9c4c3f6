"""What one request costs the web server (issue 11, item 4): `make bench BENCH_ARGS="-k request_cost"`.

For each server set-up in BENCH_SERVERS (default "daphne:1,daphne:2,uvicorn:2"; `kind:processes`), it
starts CloudPivot as `make run` does (`manage.py serve --bootstrap --server KIND --web-processes N`, a
fresh var dir; SQLite, or a fresh PostgreSQL database when DATABASE_URL and REDIS_URL are set) and measures, per
endpoint, with one sequential keep-alive client and then with BENCH_CLIENTS (default 4) concurrent
ones, BENCH_REQUESTS requests each (default 300):
- requests/s as the clients see them;
- CPU ms per request in the web processes (served.tree_cpu of the web kinds: the servers and their children).

Endpoints: POST /api/v1/tasks (submit), GET /api/v1/tasks/{id}, GET /api/v1/tasks (list, 50 a page),
POST /runner/v2/sync as the host agent (empty batch, wait=0; and a batch of 10 log pieces of 200 bytes),
GET /healthz. The demo project gets a quota of one running task, held by a `sleep`, so the submitted
tasks stay PENDING and no task runs during the measurement. This client speaks as the host agent too
(its credential is in the runs dir), for that running attempt; the real agent only long-polls meanwhile.
Several web processes need the shared channel layer: those set-ups run only with REDIS_URL.
Figures, not assertions: this machine is shared and noisy.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from tests import helpers
from tests.bench import served as serving

Client = serving.KeepAliveClient  # one keep-alive HTTP/1.1 connection, as a business system or the agent keeps one


def start_server(tmp_path: Path, kind: str, processes: int) -> serving.Served:
    """`manage.py serve --bootstrap --server KIND --web-processes N` in a fresh var dir (a fresh PostgreSQL
    database with DATABASE_URL and REDIS_URL set; else SQLite, with REDIS_URL's Redis if that alone is set)."""
    redis = {"REDIS_URL": os.environ["REDIS_URL"]} if os.environ.get("REDIS_URL") else {}
    return serving.start(
        tmp_path,
        scale_out=serving.scale_out_requested(),
        label=f"rc_{kind}_{processes}",
        extra_env=redis,
        args=("--server", kind, "--web-processes", str(processes)),
    )


def web_cpu_seconds(server: serving.Served) -> float:
    """CPU so far of the web processes serve started (a master's reaped workers through it)."""
    cpu = serving.tree_cpu([server.process.pid])
    return sum(cpu.get(kind, 0) for kind in serving.WEB_KINDS)


def measure(server: serving.Served, clients: int, requests: int, make_request) -> tuple[float, float]:
    """(requests/s, CPU ms per request in the web processes) for `requests` requests over `clients` connections."""
    per_client = max(1, requests // clients)
    connections = [Client(server.url, server.token) for _ in range(clients)]
    for connection in connections:
        make_request(connection, -1)  # warm: the connection is open, the process has seen the path
    errors: list[BaseException] = []

    def run(connection: Client, index: int) -> None:
        try:
            for i in range(per_client):
                make_request(connection, index * per_client + i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c, i)) for i, c in enumerate(connections)]
    cpu = web_cpu_seconds(server)
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    cpu = web_cpu_seconds(server) - cpu
    for connection in connections:
        connection.close()
    assert not errors, errors[0]
    total = per_client * clients
    return total / elapsed, 1000 * cpu / total


def endpoints(server: serving.Served) -> dict:
    """name → make_request(client, i), after setting up what they need (a running task, the agent's voice)."""
    server.manage(
        "shell",
        "-c",
        "from cloudpivot.accounts.models import Project, Quota; "
        "Quota.objects.update_or_create(project=Project.objects.get(slug='demo'), connection=None, "
        "defaults={'max_tasks': 1})",
    )
    setup = Client(server.url, server.token)
    running = setup.call("POST", "/api/v1/tasks", {"cloud": "local", "command": ["sleep", "600"]})
    helpers.wait_for(
        lambda: setup.call("GET", f"/api/v1/tasks/{running['id']}")["state"] == "RUNNING",
        timeout=60,
        what="the sleep task to run",
    )
    attempt = setup.call("GET", f"/api/v1/tasks/{running['id']}/attempts")["attempts"][-1]["external_name"]
    pending = setup.call("POST", "/api/v1/tasks", {"cloud": "local", "command": ["true"]})["id"]
    setup.close()

    runs = server.var_dir / "runs"
    agent = {"name": "local-" + hashlib.sha256(os.path.abspath(runs).encode()).hexdigest()[:16]}
    credential = (runs / "agent.credential").read_text().strip()
    offsets = {"next": 0}
    lock = threading.Lock()
    piece = base64.b64encode(b"x" * 199 + b"\n").decode()

    def agent_client(client: Client) -> Client:
        client.token = credential
        return client

    def empty_sync(client: Client, i: int) -> None:
        agent_client(client).call("POST", "/runner/v2/sync", {"protocol": 2, "agent": agent, "known": [attempt]})

    def batch_sync(client: Client, i: int) -> None:
        with lock:  # byte-exact offsets: each batch goes on where the last one ended
            start = offsets["next"]
            offsets["next"] += 2000
            logs = [{"stream": "stdout", "offset": start + 200 * n, "data": piece} for n in range(10)]
            agent_client(client).call(
                "POST",
                "/runner/v2/sync",
                {"protocol": 2, "agent": agent, "known": [attempt], "attempts": [{"attempt": attempt, "logs": logs}]},
            )

    return {
        "POST /api/v1/tasks (submit)": lambda c, i: c.call(
            "POST", "/api/v1/tasks", {"cloud": "local", "command": ["true"]}
        ),
        "GET /api/v1/tasks/{id}": lambda c, i: c.call("GET", f"/api/v1/tasks/{pending}"),
        "GET /api/v1/tasks (list, 50)": lambda c, i: c.call("GET", "/api/v1/tasks"),
        "POST /runner/v2/sync (empty)": empty_sync,
        "POST /runner/v2/sync (10 logs)": batch_sync,
        "GET /healthz": lambda c, i: c.call("GET", "/healthz"),
    }


def _setups() -> list[tuple[str, int]]:
    text = os.environ.get("BENCH_SERVERS", "daphne:1,daphne:2,uvicorn:2")
    return [(item.split(":")[0], int(item.split(":")[1])) for item in text.split(",") if item]


def test_request_cost(tmp_path):
    requests = int(os.environ.get("BENCH_REQUESTS", "300"))
    concurrent = int(os.environ.get("BENCH_CLIENTS", "4"))
    database = "PostgreSQL" if serving.scale_out_requested() else "SQLite"
    rows: list[tuple[str, str, float, float, float, float]] = []
    print()
    for kind, processes in _setups():
        if processes > 1 and not os.environ.get("REDIS_URL"):
            print(f"\n(skipped {kind}:{processes}: several web processes need REDIS_URL)")
            continue
        server = start_server(tmp_path, kind, processes)
        try:
            for name, make_request in endpoints(server).items():
                rate1, cpu1 = measure(server, 1, requests, make_request)
                rateN, cpuN = measure(server, concurrent, requests, make_request)
                rows.append((f"{kind}×{processes}", name, rate1, cpu1, rateN, cpuN))
                figures = f"{rate1:.0f}/s {cpu1:.1f} ms; {rateN:.0f}/s {cpuN:.1f} ms"
                print(f"  {kind}×{processes} {name}: {figures}", flush=True)
        finally:
            serving.stop(server)
    load = os.getloadavg()[0]
    print(
        f"\n=== Request cost, {database}{' + Redis' if os.environ.get('REDIS_URL') else ''}, load {load:.1f}, "
        f"{requests} requests per figure"
    )
    print(f"| set-up | request | 1 client: req/s | CPU ms/req | {concurrent} clients: req/s | CPU ms/req |")
    print("|---|---|---|---|---|---|")
    for setup, name, rate1, cpu1, rateN, cpuN in rows:
        print(f"| {setup} | {name} | {rate1:.0f} | {cpu1:.1f} | {rateN:.0f} | {cpuN:.1f} |")
    if not rows:
        pytest.skip("no server set-up could run")
