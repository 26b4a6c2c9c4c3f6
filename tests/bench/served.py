"""CloudPivot started for a benchmark as a user starts it (`manage.py serve --bootstrap`), on a fresh database.

Embedded default: SQLite in a fresh var dir. With DATABASE_URL and REDIS_URL in the environment: a fresh
PostgreSQL database of its own beside the one DATABASE_URL names (`<name>_bench_<suffix>`, dropped and made
again), and that Redis. Benchmarks talk to it over HTTP like any client: `KeepAliveClient` is one keep-alive
connection, as a business system's HTTP session is. `tree_cpu` is the CPU every benchmark reports: the
CPU time of whole process trees from /proc, by kind of process.
"""

from __future__ import annotations

import http.client
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests import helpers

TICKS = os.sysconf("SC_CLK_TCK")

# (a word of the command line, the kind it names): the first that matches wins, so the web servers come before
# the word "serve", which is in "cloudpivot.webserver" too (and in `manage.py serve`, the parent of them all).
KINDS = (
    ("cloudpivot.serve_watch", "serve"),  # what `manage.py serve` execs once its children are up (names them all)
    ("--serves agents", "web for the agents (uvicorn)"),  # serve's web process of the host agents' own port
    ("cloudpivot.webserver", "web (uvicorn)"),
    ("uvicorn", "web (uvicorn)"),
    ("daphne", "web (daphne)"),
    ("qcluster", "workers (qcluster)"),
    ("cloudpivot_agent", "host agent + supervisors"),
    ("cloudpivot-agent.pyz", "host programs of VM stand-ins"),
    ("manage.py serve", "serve"),
    ("chrom", "browser (chromium)"),
    ("playwright", "browser driver (playwright)"),
    ("pytest", "benchmark client (pytest)"),
)
WEB_KINDS = ("web (uvicorn)", "web (daphne)")


def process_kind(command: str) -> str:
    for word, kind in KINDS:
        if word in command:
            return kind
    return "programs and other"


def tree_cpu(roots: list[int]) -> dict[str, float]:
    """CPU seconds (user + system) of the process trees under `roots` so far, by kind of process.

    A process reaped by a member of a tree is in its parent's cutime+cstime; a live or zombie one is counted
    itself: each CPU tick is counted once. Take the difference of two calls for the CPU of a window.
    """
    table = helpers.processes()
    by_kind: dict[str, float] = defaultdict(float)
    for pid in helpers.descendants(roots, table):
        _, ticks, command = table[pid]
        by_kind[process_kind(command)] += ticks / TICKS
    return by_kind


def tree_memory(roots: list[int]) -> dict[str, tuple[int, float]]:
    """(processes, proportional set size in MB) of the process trees under `roots`, by kind: PSS counts a page
    shared by n processes as 1/n in each, so the sum is what the installation holds (smaps_rollup)."""
    table = helpers.processes()
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for pid in helpers.descendants(roots, table):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue  # gone meanwhile
        kb = next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
        entry = by_kind[process_kind(table[pid][2])]
        entry[0] += 1
        entry[1] += kb / 1024
    return {kind: (int(count), mb) for kind, (count, mb) in by_kind.items()}


def cpu_since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What each kind used between two `tree_cpu` readings."""
    return {kind: after.get(kind, 0) - before.get(kind, 0) for kind in set(before) | set(after)}


def scale_out_requested() -> bool:
    return bool(os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"))


def fresh_postgres_url(label: str) -> str:
    """A new empty database next to DATABASE_URL's, for this benchmark alone."""
    import psycopg

    parts = urlsplit(os.environ["DATABASE_URL"])
    suffix = os.environ.get("CLOUDPIVOT_TEST_DB_SUFFIX", "bench").replace("-", "_")
    name = f"{parts.path.lstrip('/') or 'cloudpivot'}_bench_{label}_{suffix}"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path="/" + name))


@dataclass
class Served:
    """A running `serve --bootstrap`: its URL, the demo admin's API token and password, its processes."""

    process: subprocess.Popen
    var_dir: Path
    url: str
    token: str = ""
    password: str = ""
    database: str = "embedded default (SQLite)"
    log: Path = field(default_factory=Path)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port)

    def manage(self, *args: str) -> str:
        """A management command on this CloudPivot's database and var dir; its output."""
        return helpers.manage(*args, env=self.env)

    def roots(self) -> list[int]:
        """Every process tree CloudPivot runs in: serve (web processes, qcluster) and the detached host agents."""
        pids = [self.process.pid]
        # agent.lock sits at the top of a runs dir: no walk of the attempt dirs the agent removes meanwhile
        for lock in self.var_dir.glob("*/agent.lock"):
            text = lock.read_text().strip()
            if text.isdigit():
                pids.append(int(text))
        return pids


def start(
    tmp_path: Path, *, scale_out: bool, label: str, extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> Served:
    """`manage.py serve --bootstrap [args]` in a fresh var dir (and a fresh PostgreSQL database when scale_out)."""
    port = helpers.free_port()
    var_dir = tmp_path / f"var-{label}"
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    env |= {
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base",
        "CLOUDPIVOT_VAR_DIR": str(var_dir),
        "PORT": str(port),
        "CLOUDPIVOT_QUEUE_NAME": f"bench-{label}-{os.getpid()}",
        "CLOUDPIVOT_LOG_LEVEL": "WARNING",
    }
    database = "embedded default (SQLite)"
    if scale_out:
        env["DATABASE_URL"] = fresh_postgres_url(label)
        env["REDIS_URL"] = os.environ["REDIS_URL"]
        database = "PostgreSQL + Redis"
    env |= extra_env or {}
    args = (*args, *shlex.split(os.environ.get("BENCH_SERVE_ARGS", "")))  # e.g. "--agent-processes 0" for an A/B
    log_path = tmp_path / f"serve-{label}.log"
    log = log_path.open("w")  # a file, not a pipe: nobody would drain a pipe, and a full one blocks the servers
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bootstrap", *args],
        cwd=helpers.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    served = Served(process=process, var_dir=var_dir, url=url, database=database, log=log_path, env=env)
    served.token = _wait_for_token(served)
    served.password = (var_dir / "admin-password").read_text().strip()
    return served


def stop(served: Served) -> None:
    served.process.send_signal(signal.SIGINT)
    try:
        served.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    helpers.stop_process_group(served.process, sig=signal.SIGKILL)
    from tests.plugins.servers import kill_leftover_runners

    kill_leftover_runners(served.var_dir)  # programs a benchmark left running must not load the next one


def _wait_for_token(served: Served) -> str:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for line in served.log.read_text().splitlines():
            if line.strip().startswith("api token:"):
                return line.split()[-1]
        assert served.process.poll() is None, "serve exited early: " + served.log.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError("serve printed no token within 180 s")


class KeepAliveClient:
    """JSON over one keep-alive HTTP connection (reconnecting once if the server closed it)."""

    def __init__(self, url: str, token: str, timeout: float = 120) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.timeout, self.token = parts.hostname, parts.port, timeout, token
        self.connection: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        for again in (True, False):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.connection.request(method, path, body=data, headers=headers)
                response = self.connection.getresponse()
                payload = response.read()
            except (http.client.HTTPException, ConnectionError):
                self.close()
                if again:
                    continue
                raise
            if response.status >= 400:
                raise AssertionError(f"{method} {path} → {response.status}: {payload[:500]!r}")
            return json.loads(payload)
        return None

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
