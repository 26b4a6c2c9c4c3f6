"""What one request costs the web server (issue 11, item 4): `make bench BENCH_ARGS="-k request_cost"`.

For each server set-up in BENCH_SERVERS (default "daphne:1,daphne:2,uvicorn:2"; `kind:processes`), it
starts CloudPivot as `make run` does (`manage.py serve --bootstrap --server KIND --web-processes N`, a
fresh var dir; SQLite, or a fresh PostgreSQL database when DATABASE_URL is set) and measures, per
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
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import helpers
from tests.bench import served as serving


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Client:
    """One keep-alive HTTP/1.1 connection, as a business system or the agent keeps one."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        self.connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.headers)
        response = self.connection.getresponse()
        data = response.read()
        assert response.status < 300, f"{method} {path}: {response.status} {data[:500]!r}"
        return json.loads(data) if data else {}

    def close(self) -> None:
        self.connection.close()


class Server:
    """`manage.py serve --bootstrap` with one server set-up, in a fresh var dir and database."""

    def __init__(self, tmp_path: Path, kind: str, processes: int) -> None:
        self.port = helpers.free_port()
        self.var = tmp_path / f"var-{kind}-{processes}"
        self.env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL",)}
        self.env |= {
            "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base",
            "CLOUDPIVOT_VAR_DIR": str(self.var),
            "PORT": str(self.port),
            "CLOUDPIVOT_QUEUE_NAME": f"bench-rc-{os.getpid()}-{kind}-{processes}",
            "CLOUDPIVOT_LOG_LEVEL": "WARNING",
        }
        if os.environ.get("DATABASE_URL"):
            self.env["DATABASE_URL"] = _fresh_postgres(os.environ["DATABASE_URL"], f"bench_rc_{kind}_{processes}")
        self.log_path = tmp_path / f"serve-{kind}-{processes}.log"
        self.log = self.log_path.open("w")
        command = [
            sys.executable,
            "manage.py",
            "serve",
            "--bootstrap",
            "--server",
            kind,
            "--web-processes",
            str(processes),
        ]
        self.process = subprocess.Popen(
            command,
            cwd=helpers.BASE_DIR,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.token = self._token()

    def _token(self) -> str:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            for line in self.log_path.read_text().splitlines():
                if line.startswith("  api token:"):
                    return line.split()[-1]
            assert self.process.poll() is None, "serve exited: " + self.log_path.read_text()[-3000:]
            time.sleep(0.2)
        raise AssertionError("serve printed no token within 180 s")

    def manage(self, *args: str) -> str:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=helpers.BASE_DIR,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def cpu_seconds(self) -> float:
        """CPU so far of the web processes serve started (a master's reaped workers through it)."""
        cpu = serving.tree_cpu([self.process.pid])
        return sum(cpu.get(kind, 0) for kind in serving.WEB_KINDS)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        finally:
            helpers.stop_process_group(self.process, sig=signal.SIGKILL)
            self.log.close()
        try:  # what serve left in its group (a qcluster that was slow to stop)
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]:
            if str(self.var) in _cmdline(pid):  # the agent and its supervisors (own sessions) and what they run
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass


def _fresh_postgres(url: str, name: str) -> str:
    import psycopg

    base, _, _ = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:  # the named one need not exist
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}"


def measure(server: Server, clients: int, requests: int, make_request) -> tuple[float, float]:
    """(requests/s, CPU ms per request in the web processes) for `requests` requests over `clients` connections."""
    per_client = max(1, requests // clients)
    connections = [Client(server.port, server.token) for _ in range(clients)]
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
    cpu = server.cpu_seconds()
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    cpu = server.cpu_seconds() - cpu
    for connection in connections:
        connection.close()
    assert not errors, errors[0]
    total = per_client * clients
    return total / elapsed, 1000 * cpu / total


def endpoints(server: Server) -> dict:
    """name → make_request(client, i), after setting up what they need (a running task, the agent's voice)."""
    server.manage(
        "shell",
        "-c",
        "from cloudpivot.accounts.models import Project, Quota; "
        "Quota.objects.update_or_create(project=Project.objects.get(slug='demo'), connection=None, "
        "defaults={'max_tasks': 1})",
    )
    setup = Client(server.port, server.token)
    running = setup.call("POST", "/api/v1/tasks", {"cloud": "local", "command": ["sleep", "600"]})
    helpers.wait_for(
        lambda: setup.call("GET", f"/api/v1/tasks/{running['id']}")["state"] == "RUNNING",
        timeout=60,
        what="the sleep task to run",
    )
    attempt = setup.call("GET", f"/api/v1/tasks/{running['id']}/attempts")["attempts"][-1]["external_name"]
    pending = setup.call("POST", "/api/v1/tasks", {"cloud": "local", "command": ["true"]})["id"]
    setup.close()

    runs = server.var / "runs"
    agent = {"name": "local-" + hashlib.sha256(os.path.abspath(runs).encode()).hexdigest()[:16]}
    credential = (runs / "agent.credential").read_text().strip()
    offsets = {"next": 0}
    lock = threading.Lock()
    piece = base64.b64encode(b"x" * 199 + b"\n").decode()

    def agent_client(client: Client) -> Client:
        client.headers["Authorization"] = f"Bearer {credential}"
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
    database = "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite"
    rows: list[tuple[str, str, float, float, float, float]] = []
    print()
    for kind, processes in _setups():
        if processes > 1 and not os.environ.get("REDIS_URL"):
            print(f"\n(skipped {kind}:{processes}: several web processes need REDIS_URL)")
            continue
        server = Server(tmp_path, kind, processes)
        try:
            for name, make_request in endpoints(server).items():
                rate1, cpu1 = measure(server, 1, requests, make_request)
                rateN, cpuN = measure(server, concurrent, requests, make_request)
                rows.append((f"{kind}×{processes}", name, rate1, cpu1, rateN, cpuN))
                figures = f"{rate1:.0f}/s {cpu1:.1f} ms; {rateN:.0f}/s {cpuN:.1f} ms"
                print(f"  {kind}×{processes} {name}: {figures}", flush=True)
        finally:
            server.stop()
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
