"""The database goes away under a running server (issue 16, item 2): 503 with Retry-After, never a 500.

A PostgreSQL instance of the test's own (initdb + pg_ctl in a temporary directory, on a free port; never the
machine's shared server) serves a real web server process. The test stops it: the API answers 503 with the
error shape and Retry-After, pages a plain 503 page, /readyz 503 with its reason, /healthz still 200. It
starts it again: the same requests succeed.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import pytest

from cloudpivot.credentials import agent_credential
from tests import helpers

pytestmark = [pytest.mark.e2e]

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


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], env=env, cwd=helpers.BASE_DIR, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _get(url: str, headers: dict[str, str] | None = None, body: dict | None = None) -> tuple[int, Message, bytes]:
    """GET, or POST `body` as JSON."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=(headers or {}) | {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_with_the_database_stopped_the_server_answers_503_and_recovers(private_postgres, tmp_path):
    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs") | {
        "DATABASE_URL": private_postgres.url("cloudpivot"),
        # How long a request waits for a pooled connection before it gives up (30 s by default).
        "CLOUDPIVOT_DB_POOL_TIMEOUT": "3",
    }
    _manage(env, "migrate", "--noinput", "-v", "0")
    _manage(env, "shell", "-c", "from django.contrib.auth.models import User; User.objects.create_user('dora')")
    token = _manage(env, "apitoken", "create", "dora").strip().splitlines()[-1]
    log = tmp_path / "web.log"
    web = helpers.start_daphne(port=port, env=env, log=log)
    base = f"http://127.0.0.1:{port}"
    api = {"Authorization": f"Bearer {token}"}
    page = {"Cookie": "sessionid=abcdefghijklmnopqrstuvwxyz012345"}  # the session is read from the database
    try:
        assert _get(base + "/api/v1/tasks", api)[0] == 200
        assert _get(base + "/readyz")[0] == 200
        page_status = _get(base + "/tasks/", page)[0]
        assert page_status < 500

        private_postgres.stop()
        status, headers, body = _get(base + "/api/v1/tasks", api)
        assert status == 503, body
        assert headers["Retry-After"].isdigit()
        assert headers["Content-Type"] == "application/json"
        assert json.loads(body)["code"] == "database_unavailable"
        agent = {"Authorization": f"Bearer {agent_credential(name='local-agent')}"}
        status, headers, body = _get(base + "/runner/v2/sync", agent, {"protocol": 2, "agent": {"name": "local-agent"}})
        assert (status, json.loads(body)["code"]) == (503, "database_unavailable")
        status, headers, body = _get(base + "/tasks/", page)
        assert status == 503, body
        assert headers["Content-Type"].startswith("text/html") and "Retry-After" in headers
        assert b"briefly unavailable" in body
        status, headers, body = _get(base + "/readyz")
        assert status == 503 and json.loads(body)["reason"] == "the database is not reachable"
        assert _get(base + "/healthz")[0] == 200  # alive: no reason to restart the process

        private_postgres.start()
        helpers.wait_for(
            lambda: _get(base + "/api/v1/tasks", api)[0] == 200,
            timeout=60,
            interval=1,
            what="the API to answer 200 again",
        )
        assert _get(base + "/readyz")[0] == 200
        assert _get(base + "/tasks/", page)[0] == page_status
    finally:
        helpers.stop_process_group(web)
    text = log.read_text()
    assert "Internal Server Error" not in text, text[-3000:]
