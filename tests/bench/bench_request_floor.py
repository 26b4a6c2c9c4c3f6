"""What the HTTP stack costs alone, beside a submit, for each server set-up in one run (issue 11):
`make bench BENCH_ARGS="-k floor"`.

Starts CloudPivot as `make run` does (the host agent, qcluster; SQLite, or a fresh PostgreSQL database with
DATABASE_URL and REDIS_URL) with tests/bench/floor_urls.py added to its URLs, once per set-up in
BENCH_FLOOR_SETUPS (default "shared,own-asgi,own"; with gunicorn importable also "gunicorn"):
- shared: uvicorn ×1 serves everything, the host agent's long-polls and syncs included (`--agent-processes 0`),
  the token API through Django's ASGI handler: main before 2026-12-03, and the SQLite layout before 2026-12-04;
- own-asgi: uvicorn ×1 for the clients, and one more uvicorn process for the host agents on a port of their own
  (`--agent-processes 1`), the token API still through the ASGI handler;
- own: the same with the token API through the WSGI bridge (cloudpivot/wsgi_bridge.py): the PostgreSQL layout
  since 2026-12-04;
- shared-wsgi: as shared, with the token API through the WSGI bridge: the SQLite layout since 2026-12-04;
- gunicorn: as "own", and the requests measured go to gunicorn (gthread, BENCH_GUNICORN_WORKERS workers ×
  4 threads, WSGI: cloudpivot.wsgi) on a port of its own, the candidate "a WSGI server with worker processes
  for HTTP beside uvicorn for websockets";
and measures with one sequential keep-alive client, BENCH_REQUESTS requests each (default 300):
requests/s and CPU ms per request in the process(es) that served it, and for the submit the CPU of every
process and of the agents' web process too:
- GET /healthz: a bare Django view on the Runner API's one-middleware stack;
- GET /api/v1/_floor/bare: a bare Django view on the token API's stack;
- GET /api/v1/_floor/drf: an empty DRF view, bearer token checked;
- POST /api/v1/_floor/drf: the same with a JSON body parsed, and audited (one INSERT, as every API write);
- GET /api/v1/tasks/{id}, POST /api/v1/tasks (["true"], run by the host agent meanwhile).
The first four are the floor a submit cannot go below on this stack. Then, in the same run, two references:
- a raw ASGI application under uvicorn (tests/bench/raw_asgi.py, no Django): the floor of the process model;
- slurmrestd's submit rate with the same sequential client model (tests/bench/slurm_peer.py), the issue's
  yardstick, unless the Slurm peer is not set up.
Figures, not assertions.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable

from tests import helpers
from tests.bench import served as serving
from tests.bench import slurm_peer

SPEC = {"cloud": "local", "command": ["true"]}
ASGI = {"CLOUDPIVOT_TOKEN_API_WSGI": "false"}  # the token API through Django's ASGI handler
SETUPS = {  # name → (serve's arguments, environment)
    "shared": (("--agent-processes", "0"), ASGI),
    "own-asgi": (("--agent-processes", "1"), ASGI),
    "own": (("--agent-processes", "1"), {"CLOUDPIVOT_TOKEN_API_WSGI": "true"}),  # the bridge (the default)
    "shared-wsgi": (("--agent-processes", "0"), {"CLOUDPIVOT_TOKEN_API_WSGI": "true"}),  # the bridge, one process
    "gunicorn": (("--agent-processes", "1"), ASGI),
}
AGENTS = "web for the agents (uvicorn)"


def setups() -> list[str]:
    default = "shared,own-asgi,own" + (",gunicorn" if importlib.util.find_spec("gunicorn") else "")
    return [name for name in os.environ.get("BENCH_FLOOR_SETUPS", default).split(",") if name]


class Target:
    """Where the measured requests go: a URL, and the CPU so far (seconds) of the processes serving them."""

    def __init__(self, url: str, cpu: Callable[[], float]) -> None:
        self.url, self.cpu = url, cpu


def measure(target: Target, token: str, requests: int, call) -> tuple[float, float]:
    """(requests/s, CPU ms per request of the target's processes) for `requests` sequential requests."""
    client = serving.KeepAliveClient(target.url, token)
    call(client)  # warm: the connection is open, the process has seen the path
    cpu = target.cpu()
    began = time.monotonic()
    for _ in range(requests):
        call(client)
    elapsed = time.monotonic() - began
    cpu = target.cpu() - cpu
    client.close()
    return requests / elapsed, 1000 * cpu / requests


def start_gunicorn(server: serving.Served) -> tuple[subprocess.Popen, str]:
    """gunicorn (gthread) on a port of its own, on serve's database, relaying its rings to serve's web processes."""
    port = helpers.free_port()
    workers = os.environ.get("BENCH_GUNICORN_WORKERS", "2")
    names = ",".join(f"cloudpivot-layer-{server.process.pid}-{index}" for index in range(2))  # serve's 1 + 1
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--worker-class",
            "gthread",
            "--workers",
            workers,
            "--threads",
            "4",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "cloudpivot.wsgi:application",
        ],
        cwd=helpers.BASE_DIR,
        env=server.env | {"CLOUDPIVOT_LAYER_PEERS": names},
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    helpers.wait_for(lambda: _answers(url), timeout=60, what="gunicorn to answer")
    return process, url


def _answers(url: str) -> bool:
    import urllib.request

    try:
        urllib.request.urlopen(url + "/healthz", timeout=2).read()
        return True
    except OSError:
        return False


def run_setup(tmp_path, setup: str, requests: int) -> list[tuple[str, float, float, str]]:
    redis = {"REDIS_URL": os.environ["REDIS_URL"]} if os.environ.get("REDIS_URL") else {}
    server = serving.start(
        tmp_path,
        scale_out=serving.scale_out_requested(),
        label=f"floor_{setup}",
        extra_env={"DJANGO_SETTINGS_MODULE": "tests.bench.floor_settings", **redis, **SETUPS[setup][1]},
        args=SETUPS[setup][0],
    )
    gunicorn = None
    rows = []
    try:

        def of_kinds(roots: list[int], kinds: tuple[str, ...]) -> float:
            cpu = serving.tree_cpu(roots)
            return sum(cpu.get(kind, 0) for kind in kinds)

        target = Target(server.url, lambda: of_kinds([server.process.pid], serving.WEB_KINDS))
        if setup == "gunicorn":
            gunicorn, url = start_gunicorn(server)
            target = Target(url, lambda: sum(serving.tree_cpu([gunicorn.pid]).values()))
        client = serving.KeepAliveClient(target.url, server.token)
        task = client.call("POST", "/api/v1/tasks", SPEC)["id"]
        client.close()
        endpoints = {
            "GET /healthz (bare Django, machine stack)": lambda c: c.call("GET", "/healthz"),
            "GET bare Django view (token API stack)": lambda c: c.call("GET", "/api/v1/_floor/bare"),
            "GET empty DRF view (bearer token)": lambda c: c.call("GET", "/api/v1/_floor/drf"),
            "POST empty DRF view (bearer token, JSON, audited)": lambda c: c.call("POST", "/api/v1/_floor/drf", SPEC),
            "GET /api/v1/tasks/{id}": lambda c: c.call("GET", f"/api/v1/tasks/{task}"),
        }
        for name, call in endpoints.items():
            rate, cpu = measure(target, server.token, requests, call)
            rows.append((name, rate, cpu, ""))
            print(f"  {setup}: {name}: {rate:.0f}/s {cpu:.2f} ms", flush=True)
        roots = server.roots() + ([gunicorn.pid] if gunicorn else [])
        before = serving.tree_cpu(roots)
        rate, cpu = measure(target, server.token, requests, lambda c: c.call("POST", "/api/v1/tasks", SPEC))
        spent = serving.cpu_since(before, serving.tree_cpu(roots))
        every = sum(spent.values()) * 1000 / requests
        agents = spent.get(AGENTS, 0) * 1000 / requests
        rows.append(
            ("POST /api/v1/tasks (submit; the agent runs them meanwhile)", rate, cpu, f"{every:.1f} ({agents:.1f})")
        )
        print(f"  {setup}: submit {rate:.0f}/s {cpu:.2f} ms; every process {every:.1f}, agents' web {agents:.1f}")
    finally:
        if gunicorn is not None:
            helpers.stop_process_group(gunicorn)
        serving.stop(server)
    return rows


def raw_asgi_floor(requests: int) -> tuple[float, float]:
    """(requests/s, CPU ms per request) of tests/bench/raw_asgi.py under uvicorn with serve's loop and parser."""
    port = helpers.free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--loop", "uvloop", "--http", "httptools", "--log-level", "warning"]
        + ["--port", str(port), "tests.bench.raw_asgi:app"],
        cwd=helpers.BASE_DIR,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        helpers.wait_for(lambda: _answers(url), timeout=60, what="the raw ASGI app to answer")
        target = Target(url, lambda: sum(serving.tree_cpu([process.pid]).values()))
        return measure(target, "none", requests, lambda c: c.call("GET", "/"))
    finally:
        helpers.stop_process_group(process)


def test_request_floor(tmp_path):
    requests = int(os.environ.get("BENCH_REQUESTS", "300"))
    results: dict[str, list] = {}
    loads = [os.getloadavg()[0]]
    for setup in setups():
        results[setup] = run_setup(tmp_path, setup, requests)
        loads.append(os.getloadavg()[0])
    names = list(results)
    raw = raw_asgi_floor(requests)
    why_not = slurm_peer.available()
    slurm = None if why_not else slurm_peer.measure(n=requests, serial_n=1)
    loads.append(os.getloadavg()[0])
    database = "PostgreSQL + Redis" if serving.scale_out_requested() else "embedded default (SQLite)"
    print(f"\n=== Request floor, {database}, one sequential client, {requests} requests each")
    print(f"load average (1 min) at the start and after each set-up: {' → '.join(f'{load:.1f}' for load in loads)}")
    print("| request (req/s · CPU ms per request of the serving processes) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for index, (name, *_) in enumerate(results[names[0]]):
        cells = []
        for setup in names:
            _, rate, cpu, every = results[setup][index]
            cells.append(f"{rate:.0f} · {cpu:.2f}" + (f" (every process {every})" if every else ""))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("(every process: CPU ms per submit summed over CloudPivot's processes; in brackets the agents' web process)")
    print(f"raw ASGI app under uvicorn, no Django (tests/bench/raw_asgi.py): {raw[0]:.0f}/s · {raw[1]:.2f} ms")
    if slurm:
        rate = slurm["submit_rate"]
        print(f"slurmrestd, the same client model, {requests} × sbatch of `true` (Slurm peer): {rate:.0f}/s")
    else:
        print(f"slurmrestd: not measured ({why_not})")
