"""A whole CloudPivot installation of one test's own, run as an operator runs it (docs/operations.md).

Its own var dir (secret key, runs directory, archive), its own database (a SQLite file in the var dir, or a
fresh database on the test run's PostgreSQL server) and its processes started one by one: web processes
accepting on one listening socket the test holds (so each can be restarted while the others serve), qcluster
workers, and the `local` connection's host agent started from the command line `manage.py host_agent` prints,
as a service manager would. Nothing here shares state with pytest-django's test database.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings

from tests import helpers

FINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "UNKNOWN"}
WORKER_STOP_GRACE = 5
WEB_SERVER = [sys.executable, "-m", "cloudpivot.webserver"]  # what `manage.py serve` runs by default


def using_postgresql() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def redis_url() -> str:
    """The test run's Redis, or the machine's (several web processes need the shared channel layer); a run on the
    embedded default beside another test run picks its own database with CLOUDPIVOT_TEST_REDIS_URL (.ci/run)."""
    return settings.REDIS_URL or os.environ.get("CLOUDPIVOT_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"


class PostgresDatabases:
    """Fresh databases on the test run's PostgreSQL server, named after its test database, dropped at the end."""

    def __init__(self) -> None:
        db = settings.DATABASES["default"]
        self.params = {
            "host": db["HOST"] or "127.0.0.1",
            "port": int(db["PORT"] or 5432),
            "user": db["USER"],
            "password": db["PASSWORD"] or None,
        }
        suffix = os.environ.get("CLOUDPIVOT_TEST_DB_SUFFIX", "main")
        self.prefix = f"{db['NAME'].removeprefix('test_')}_{suffix}_ops"
        self.made: list[str] = []

    def _admin(self, sql: str) -> None:
        with psycopg.connect(dbname="postgres", autocommit=True, **self.params) as conn:
            conn.execute(sql)

    def fresh(self, name: str) -> str:
        database = f"{self.prefix}_{name}"
        self._admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        self._admin(f'CREATE DATABASE "{database}"')
        self.made.append(database)
        auth = self.params["user"] + (f":{self.params['password']}" if self.params["password"] else "")
        return f"postgres://{auth}@{self.params['host']}:{self.params['port']}/{database}"

    def drop_all(self) -> None:
        for database in self.made:
            self._admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


class Installation:
    def __init__(self, root: Path, *, var_dir: Path, database_url: str, redis: str = "", port: int = 0) -> None:
        self.root, self.var_dir, self.database_url = root, var_dir, database_url
        self.port = port or helpers.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        ours = ("DJANGO_", "CLOUDPIVOT_", "DATABASE_", "REDIS_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
        self.env = env | {
            "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base",
            "CLOUDPIVOT_VAR_DIR": str(var_dir),  # the secret key, the runs directory, the archive: all in here
            "DATABASE_URL": database_url,
            "CLOUDPIVOT_QUEUE_NAME": f"ops-test-{os.getpid()}-{self.port}",
            "CLOUDPIVOT_RUNNER_SERVER_URL": self.url,
            "CLOUDPIVOT_WORKERS": "2",
            # A worker stops once its job in hand ends; the ticker job runs this long (55 s by default).
            "CLOUDPIVOT_TICKER_SECONDS": "8",
            "CLOUDPIVOT_LOG_LEVEL": "WARNING",
            "PORT": str(self.port),
        }
        if redis:
            self.env["REDIS_URL"] = redis
        self.listener: socket.socket | None = None
        self.web: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self.agent: subprocess.Popen | None = None
        self.token = ""
        self._started = 0

    # ------------------------------------------------------------ management commands
    def manage(self, *args: str, timeout: float = 300) -> str:
        return helpers.manage(*args, env=self.env, timeout=timeout)

    def set_up(self) -> None:
        """What a first install does: migrate, schedules, an admin with a project, the `local` cloud, a token."""
        self.manage("migrate", "--noinput", "-v", "0")
        make = "from django.core.management import call_command as c; c('sync_schedules'); c('bootstrap_demo', token=1)"
        output = self.manage("shell", "-c", make)  # one start-up of Django for both
        self.token = output.strip().splitlines()[-1].removeprefix("api token: ")

    # ------------------------------------------------------------ processes
    def _log(self, name: str):
        self._started += 1
        return (self.logs / f"{self._started:02d}-{name}.log").open("ab")

    def start_web(self, count: int = 1) -> None:
        if self.listener is None:
            self.listener = socket.socket()
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.listener.bind(("127.0.0.1", self.port))
            self.listener.listen(1024)
            self.listener.set_inheritable(True)
        for _ in range(count):
            self.web.append(self._start_web_process())
        helpers.wait_for(lambda: self.answers("/healthz"), timeout=60, what="the web server to answer")

    def _start_web_process(self) -> subprocess.Popen:
        fd = self.listener.fileno()
        log_file = self._log("web")
        process = subprocess.Popen(
            [*WEB_SERVER, "--fd", str(fd), "cloudpivot.asgi:application"],
            env=self.env,
            cwd=helpers.BASE_DIR,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(fd,),
        )
        path = Path(log_file.name)
        helpers.wait_for(
            # logged once the application is loaded; the socket is served right after (no lifespan)
            lambda: (
                f"Started server process [{process.pid}]" in path.read_text(errors="replace")
                or process.poll() is not None
            ),
            timeout=60,
            what="a web process to accept",
        )
        time.sleep(0.5)
        assert process.poll() is None, path.read_text()[-3000:]
        return process

    def restart_web(self, index: int) -> None:
        """Stop one web process (SIGTERM: it finishes what it serves) and start its replacement."""
        helpers.stop_process_group(self.web[index], timeout=30)
        self.web[index] = self._start_web_process()

    def start_workers(self, count: int = 1) -> None:
        for _ in range(count):
            self.workers.append(self._start_qcluster())

    def _start_qcluster(self) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            env=self.env,
            cwd=helpers.BASE_DIR,
            stdout=self._log("qcluster"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def restart_workers(self, index: int) -> None:
        """SIGTERM, then SIGKILL after a grace, as `manage.py serve` and the service units stop a qcluster (it
        bounds its own stop too: cloudpivot/workers/stop.py); a killed worker loses nothing (test_workers.py)."""
        helpers.stop_process_group(self.workers[index], timeout=WORKER_STOP_GRACE)
        self.workers[index] = self._start_qcluster()

    @property
    def runs_dir(self) -> Path:
        return self.var_dir / "runs"

    def agent_pid(self) -> int | None:
        from clusters.backends.local import agent_pid

        return agent_pid(self.runs_dir)

    def start_agent(self) -> int:
        """The host agent as a service runs it: the command line `manage.py host_agent` prints (its own session, so
        stopping it leaves the programs' supervisors alone). A reconcile pass may have started one first: then
        this one exits 75 and that one serves."""
        command = shlex.split(self.manage("host_agent").strip())
        self.agent = subprocess.Popen(
            command,
            env=self.env,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=self._log("agent"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        pid = helpers.wait_for(self.agent_pid, timeout=30, what="the host agent to hold its lock")
        assert self.agent.poll() in (None, 75), self.agent.returncode
        return pid

    def stop_agent(self) -> None:
        """SIGTERM to the agent alone, whoever started it; its programs run on under their supervisors."""
        pid = self.agent_pid()
        if pid:
            os.kill(pid, signal.SIGTERM)
            helpers.wait_for(lambda: self.agent_pid() is None, timeout=30, what="the host agent to stop")
        if self.agent is not None:
            self.agent.wait(timeout=10)

    def stop(self) -> None:
        """Every CloudPivot process (web, workers, agent); the programs run on, as after a service stop."""
        try:
            self.stop_agent()
        finally:
            for process in self.web:
                helpers.stop_process_group(process, timeout=30)
            for process in self.workers:
                helpers.stop_process_group(process, timeout=WORKER_STOP_GRACE)
            if self.listener is not None:
                self.listener.close()
                self.listener = None

    # ------------------------------------------------------------ the API
    def answers(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as answer:
                return answer.status == 200
        except OSError:
            return False

    def api(self, method: str, path: str, body: dict | None = None) -> Any:
        return helpers.api_call(self.url, method, "/api/v1" + path, self.token, body, timeout=30)

    def submit(self, command: list[str], **spec: Any) -> str:
        return self.api("POST", "/tasks", {"cloud": "local", "command": command, **spec})["id"]

    def task(self, task_id: str) -> dict:
        return self.api("GET", f"/tasks/{task_id}")

    def stdout(self, task_id: str) -> str:
        return self.api("GET", f"/tasks/{task_id}/logs?stream=stdout&limit=1000000")["data"]

    def wait_final(self, ids: dict[str, str], timeout: float) -> dict[str, dict]:
        def states() -> dict[str, str]:
            return {name: self.task(task_id)["state"] for name, task_id in ids.items()}

        helpers.wait_for(
            lambda: set(states().values()) <= FINAL, timeout=timeout, interval=0.5, what=lambda: f"the end: {states()}"
        )
        return {name: self.task(task_id) for name, task_id in ids.items()}

    def web_log_text(self) -> str:
        return "".join(path.read_text(errors="replace") for path in sorted(self.logs.glob("*-web.log")))


def chatty(work: Path, name: str, gate: Path, exit_code: int = 0) -> list[str]:
    """A program that records its run in `work/<name>.runs`, prints numbered lines (and keeps its own copy of
    them in `work/<name>.out`) until `gate` exists, then prints `end` and exits with `exit_code`."""
    runs, copy = work / f"{name}.runs", work / f"{name}.out"
    script = (
        f'echo run >> "{runs}"; i=0; '
        f'while [ ! -e "{gate}" ]; do i=$((i+1)); echo "{name} line $i" >> "{copy}"; echo "{name} line $i"; '
        "sleep 0.2; done; "
        f'echo end >> "{copy}"; echo end; exit {exit_code}'
    )
    return ["sh", "-c", script]


def runs_of(work: Path, name: str) -> int:
    path = work / f"{name}.runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


class Prober:
    """Polls the API (a task list and /readyz) from a thread; every answer is recorded. An upgrade may answer
    503 with Retry-After, never a 500, and never refuse the connection."""

    def __init__(self, installation: Installation) -> None:
        self.installation = installation
        self.answers: list[tuple[str, Any, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="api-prober", daemon=True)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.installation.token}"}
        while not self._stop.is_set():
            for path in ("/api/v1/tasks?limit=5", "/readyz"):
                request = urllib.request.Request(self.installation.url + path, headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        json.loads(answer.read())
                        self.answers.append((path, answer.status, ""))
                except urllib.error.HTTPError as error:
                    self.answers.append((path, error.code, error.headers.get("Retry-After") or ""))
                except OSError as error:
                    self.answers.append((path, repr(error), ""))
            self._stop.wait(0.1)

    def faults(self) -> list[tuple[str, Any, str]]:
        """What a client must never see: a 5xx other than 503 with Retry-After, or no answer at all."""
        return [a for a in self.answers if not (a[1] == 200 or (a[1] == 503 and a[2].isdigit()))]
