"""Dependencies of the test's own (issue 16, item 2): a PostgreSQL, a Redis and a whole CloudPivot installation
that a test may stop, restart or starve without touching the machine's shared servers.

- `private_postgres`: initdb + pg_ctl in a temporary directory, on a free port.
- `private_redis`: a redis-server on a free port; stopped and started again on the same port.
- `Installation`: a CloudPivot of its own (database URL, Redis URL, var/ and runs directories given), set up
  through manage.py (migrate, one admin with a project, the `local` connection, an API token and a session)
  and run as real processes: a web server, a qcluster, and the host agent the workers launch.
- `small_disk`: a 24 MB tmpfs mounted for one test, and `fill`, which writes a file until ENOSPC.
- `LogFollower`: one task's websocket (`/ws/tasks/<id>/`) followed as the task page follows it, reconnecting
  from its positions whenever the connection ends; it records every gap or duplicate it is sent.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import pytest

from tests import helpers

POSTGRES_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


class PrivatePostgres:
    """initdb'd in a temporary directory; run as the `postgres` account when we are root (initdb refuses root)."""

    def __init__(self) -> None:
        self.bin = Path(POSTGRES_BIN[-1])
        self.root = Path(tempfile.mkdtemp(prefix="cloudpivot-pg-"))
        self.data = self.root / "data"
        self.port = helpers.free_port()
        self.account = "postgres" if os.geteuid() == 0 else ""
        if self.account:
            account = pwd.getpwnam(self.account)
            os.chown(self.root, account.pw_uid, account.pw_gid)
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")

    def run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self.account:
            command = ["runuser", "-u", self.account, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120, cwd=self.root)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def remove(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_postgres():
    if not POSTGRES_BIN:
        pytest.fail("PostgreSQL's server programs are not installed (apt-get install postgresql)")
    server = PrivatePostgres()
    try:
        server.start()
        server.run("createdb", "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", "cloudpivot")
        yield server
    finally:
        server.remove()


class PrivateRedis:
    """A redis-server of the test's own, without persistence; `start` after `stop` reuses the port."""

    def __init__(self, root: Path) -> None:
        self.root, self.port = root, helpers.free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"],
            cwd=self.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        helpers.wait_for(self.answers, what="the test's Redis to answer", timeout=10)

    def answers(self) -> bool:
        ping = subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True)
        return ping.stdout.strip() == b"PONG"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"


@pytest.fixture
def private_redis(tmp_path):
    if not shutil.which("redis-server"):
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def http(url: str, headers: dict[str, str] | None = None, body: dict | None = None) -> tuple[int, Message, bytes]:
    """GET, or POST `body` as JSON: (status, headers, body), whatever the status; (0, …) when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=(headers or {}) | {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()
    except OSError as error:
        return 0, Message(), str(error).encode()


SETUP = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from cloudpivot.accounts.models import Membership, Project, Role
from cloudpivot.accounts.services import api_token_create
from clusters.models import CloudConnection
user = get_user_model().objects.create_user("dora", "dora@example.org", "pw-dora")
project = Project.objects.create(slug="lab", name="Lab")
Membership.objects.create(project=project, user=user, role=Role.ADMIN)
CloudConnection.objects.create(cloud_id="local", backend="local").projects.add(project)
client = Client()
client.force_login(user)
print(json.dumps({"token": api_token_create(user=user, name="test")[1], "session": client.cookies["sessionid"].value}))
"""


class Installation:
    """A CloudPivot of the test's own: its database, Redis (or none), var/ and runs directories, and processes."""

    def __init__(self, root: Path, *, database_url: str, redis_url: str = "", var_dir: Path | None = None) -> None:
        self.root, self.port = root, helpers.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.var_dir = var_dir or root / "var"
        self.runs_dir = self.var_dir / "runs"
        self.env = helpers.server_environment(port=self.port, runs_dir=self.runs_dir) | {
            "DATABASE_URL": database_url,
            "CLOUDPIVOT_VAR_DIR": str(self.var_dir),
            # How long a request waits for a pooled connection before it gives up (30 s by default).
            "CLOUDPIVOT_DB_POOL_TIMEOUT": "3",
        }
        self.env.pop("REDIS_URL", None)
        if redis_url:
            self.env["REDIS_URL"] = redis_url
        self.web_log, self.workers_log = root / "web.log", root / "workers.log"
        self.web: subprocess.Popen | None = None
        self.workers: subprocess.Popen | None = None
        self.token = self.session = ""

    def manage(self, *args: str) -> str:
        return helpers.manage(*args, env=self.env)

    def set_up(self) -> None:
        self.manage("migrate", "--noinput", "-v", "0")
        made = json.loads(self.manage("shell", "-c", SETUP).strip().splitlines()[-1])
        self.token, self.session = made["token"], made["session"]

    def start(self) -> None:
        self.web = helpers.start_daphne(port=self.port, env=self.env, log=self.web_log)
        self.workers = helpers.start_qcluster(env=self.env, log=self.workers_log)

    def stop(self) -> None:
        for process in (self.workers, self.web):
            if process is not None:
                helpers.stop_process_group(process, sig=9)
        from tests.plugins.servers import kill_leftover_runners

        kill_leftover_runners(self.runs_dir)

    def call(self, path: str, body: dict | None = None) -> tuple[int, Message, bytes]:
        return http(self.url + path, {"Authorization": f"Bearer {self.token}"}, body)

    def json(self, path: str, body: dict | None = None) -> dict:
        status, _, answer = self.call(path, body)
        assert status in (200, 201, 202), (status, answer[:500])
        return json.loads(answer)

    def submit(self, command: list[str], name: str) -> str:
        return self.json("/api/v1/tasks", {"cloud": "local", "command": command, "name": name})["id"]

    def log(self, task_id: str) -> str:
        """The whole stored log of the task's latest attempt, both streams, read page by page."""
        text, offset = "", 0
        while True:
            page = self.json(f"/api/v1/tasks/{task_id}/logs?offset={offset}")
            text += page["data"]
            if page["next_offset"] == offset:
                return text
            offset = page["next_offset"]

    def server_errors(self) -> list[str]:
        """Lines of the web server's log that tell of a 500 (a request's, or a websocket handshake's)."""
        text = self.web_log.read_text(errors="replace") if self.web_log.exists() else ""
        return [
            line
            for line in text.splitlines()
            if "Internal Server Error" in line or "Exception in ASGI application" in line
        ]


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MB tmpfs of the test's own, mounted on tmp_path/var (needs root; CI runs as root)."""
    mount_point = tmp_path / "var"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount_point)], capture_output=True)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (root needed): {done.stderr.decode()}")
    try:
        yield mount_point
    finally:
        if (mount_point / "runs").is_dir():  # for a failure's reader: the mount goes
            shutil.copytree(mount_point / "runs", tmp_path / "runs-kept", dirs_exist_ok=True)
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(directory: os.PathLike) -> str:
    """Write a file until the file system answers ENOSPC; returns it (remove it to free the space)."""
    filler = os.path.join(directory, "filler")
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096):
            try:
                while True:
                    os.write(descriptor, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(descriptor)
    return filler


class LogFollower(threading.Thread):
    """One task's websocket followed as the task page does: every close is followed by a reconnect from the
    last event seq and log position received. A message that does not start where the last one ended is a gap
    (position beyond) or a duplicate (before): both are recorded in `problems`."""

    def __init__(self, installation: Installation, task_id: str) -> None:
        super().__init__(daemon=True, name=f"follow-{task_id}")
        self.installation, self.task_id = installation, task_id
        self.seq = self.attempt = self.position = 0
        self.log = ""
        self.connections = 0
        self.problems: list[str] = []
        self.done = threading.Event()
        self.drop = threading.Event()  # set: close the connection now (as a page whose network went away)

    def address(self) -> str:
        query = f"after_seq={self.seq}&log_attempt={self.attempt}&log_position={self.position}"
        return f"ws://127.0.0.1:{self.installation.port}/ws/tasks/{self.task_id}/?{query}"

    def run(self) -> None:
        from websockets.exceptions import WebSocketException
        from websockets.sync.client import connect

        headers = {"Origin": self.installation.url, "Cookie": f"sessionid={self.installation.session}"}
        while not self.done.is_set():
            try:
                with connect(self.address(), additional_headers=headers, open_timeout=5, close_timeout=1) as socket:
                    self.connections += 1
                    while not self.done.is_set() and not self.drop.is_set():
                        try:
                            self.take(json.loads(socket.recv(timeout=0.5)))
                        except TimeoutError:
                            continue
                    self.drop.clear()
            except (OSError, WebSocketException):
                time.sleep(0.3)

    def take(self, message: dict) -> None:
        if message["type"] == "event":
            if message["seq"] != self.seq + 1:
                self.problems.append(f"event seq {message['seq']} after {self.seq}")
            self.seq = max(self.seq, message["seq"])
        elif message["type"] == "log":
            if message["attempt"] != self.attempt:
                self.attempt, self.position = message["attempt"], 0
            if message["position"] != self.position:
                self.problems.append(f"log from {message['position']} when {self.position} was the end")
            if message["position"] <= self.position < message["next_position"]:
                self.log += message["data"][self.position - message["position"] :]
                self.position = message["next_position"]

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)
