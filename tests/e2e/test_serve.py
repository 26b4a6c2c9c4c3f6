"""`make run` as a new user meets it: one command, then the printed token works against the printed URL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests import helpers
from tests.e2e import installation

pytestmark = pytest.mark.e2e


def environment(var_dir: Path, **extra_env: str) -> dict[str, str]:
    """The embedded default (SQLite) in `var_dir`; extra_env may add Redis."""
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    return env | {
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base",
        "CLOUDPIVOT_VAR_DIR": str(var_dir),
        "CLOUDPIVOT_QUEUE_NAME": f"serve-test-{os.getpid()}",
        **extra_env,
    }


def serve(tmp_path, *args: str, bootstrap: bool = True, **extra_env: str) -> tuple[subprocess.Popen, int]:
    """`manage.py serve [--bootstrap]` on the embedded default in its own var dir (extra_env may add Redis)."""
    port = helpers.free_port()
    env = environment(tmp_path / "var", PORT=str(port), **extra_env)
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", *(["--bootstrap"] if bootstrap else []), *args],
        cwd=helpers.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return process, port


def read_until(process: subprocess.Popen, prefix: str, timeout: float = 90) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while not any(line.startswith(prefix) for line in lines):
        assert time.monotonic() < deadline and process.poll() is None, "".join(lines)
        lines.append(process.stdout.readline())
    return lines


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    finally:
        helpers.stop_process_group(process, sig=signal.SIGKILL)


SESSION = """
import json
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
client = Client()
client.force_login(get_user_model().objects.get(username="admin"))
print(json.dumps(client.cookies[settings.SESSION_COOKIE_NAME].value))
"""


class PageFollower(threading.Thread):
    """A task page's websocket (the main port): the log messages it gets, each a push or the 1 s poll's read."""

    def __init__(self, url: str, session: str) -> None:
        super().__init__(daemon=True)
        self.url, self.session = url, session
        self.logs: list[dict] = []
        self.done = threading.Event()

    def run(self) -> None:
        from websockets.sync.client import connect

        headers = {"Origin": "http://127.0.0.1", "Cookie": f"sessionid={self.session}"}
        with connect(self.url, additional_headers=headers, open_timeout=10) as socket:
            while not self.done.is_set():
                try:
                    message = json.loads(socket.recv(timeout=0.2))
                except TimeoutError:
                    continue
                if message["type"] == "log":
                    self.logs.append(message)


def test_serve_bootstraps_runs_a_task_and_stops_on_ctrl_c(tmp_path):
    """The agent reports to a web process of its own, and the task page's websocket on the main port hears it
    as it goes (the relay of the in-process layer), not only at its once-a-second read."""
    process, port = serve(tmp_path, "--agent-processes", "1")  # on SQLite they share the port by default
    try:
        lines = read_until(process, "  api token:")
        output = "".join(lines)
        assert f"CloudPivot is running: http://127.0.0.1:{port}/" in output
        agents_url = next(line.split()[-1] for line in lines if "web process for the host agents on" in line)
        assert agents_url.startswith("http://127.0.0.1:") and agents_url != f"http://127.0.0.1:{port}"
        assert "  user: admin" in output and "  password: " in output
        token = next(line.split()[-1] for line in lines if line.startswith("  api token:"))
        url = f"http://127.0.0.1:{port}/api/v1/tasks"

        def call(method, path="", body=None):
            return helpers.api_call(url, method, path, token, body)

        session = json.loads(
            subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", SESSION],
                cwd=helpers.BASE_DIR,
                env=environment(tmp_path / "var"),
                check=True,
                capture_output=True,
                text=True,
            ).stdout.splitlines()[-1]
        )
        program = "import time\nfor n in range(12):\n    print(n, flush=True); time.sleep(0.25)"
        task = call("POST", body={"cloud": "local", "command": ["python3", "-c", program]})
        follower = PageFollower(f"ws://127.0.0.1:{port}/ws/tasks/{task['id']}/", session)
        follower.start()
        helpers.wait_for(
            lambda: call("GET", f"/{task['id']}")["state"] in ("SUCCEEDED", "FAILED", "UNKNOWN"),
            timeout=60,
            interval=0.3,
            what="the task to finish",
        )
        assert call("GET", f"/{task['id']}")["state"] == "SUCCEEDED"
        assert call("GET", f"/{task['id']}/logs")["data"] == "".join(f"{n}\n" for n in range(12))
        time.sleep(1.5)
        follower.done.set()
        follower.join(timeout=10)
        # 3 s of output: the page's own reads (1 s apart) would bring it in about 4 pieces; pushed, in many more.
        assert len(follower.logs) >= 7, follower.logs
        agent = int((tmp_path / "var" / "runs" / "agent.lock").read_text())
        assert helpers.pid_alive(agent)  # serve started the host agent
        command = Path(f"/proc/{agent}/cmdline").read_bytes().split(b"\0")
        assert command[command.index(b"--server-url") + 1].decode() == agents_url
    finally:
        stop(process)
    assert process.returncode == 0, process.stdout.read()
    helpers.wait_for(lambda: not helpers.pid_alive(agent), timeout=10, what="Ctrl-C to stop the host agent too")


def test_several_web_processes_need_no_redis(tmp_path):
    """The in-process layer relays between serve's web processes: no shared layer needed."""
    process, port = serve(tmp_path, "--web-processes", "2")
    try:
        assert "  2 web processes (uvicorn) on the port\n" in read_until(process, "  api token:")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            assert answer.status == 200
    finally:
        stop(process)
    assert process.returncode == 0


def test_several_web_processes_accept_on_one_port(tmp_path):
    """Each web process alone answers while the other is frozen (SIGSTOP): both accept on the shared socket."""
    redis_url = installation.redis_url()
    process, port = serve(tmp_path, "--web-processes", "2", REDIS_URL=redis_url)
    try:
        assert "  2 web processes (uvicorn) on the port\n" in read_until(process, "  api token:")
        table = helpers.processes()
        web = [
            pid
            for pid, (parent, _, command) in table.items()
            if parent == process.pid and "webserver" in command and "agents" not in command
        ]
        assert len(web) == 2, web
        for frozen in web:
            os.kill(frozen, signal.SIGSTOP)
            try:
                for _ in range(5):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
                        assert answer.status == 200
            finally:
                os.kill(frozen, signal.SIGCONT)
    finally:
        stop(process)
    assert process.returncode == 0


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    """A var dir with a migrated embedded database, for the runs of serve without --bootstrap (it costs ~10 s)."""
    var_dir = tmp_path_factory.mktemp("serve") / "var"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=helpers.BASE_DIR,
        env=environment(var_dir),
        check=True,
        timeout=120,
    )
    return var_dir


def serve_migrated(var_dir: Path) -> tuple[subprocess.Popen, int, set[int]]:
    """`manage.py serve` (no bootstrap, two workers) in `var_dir`, once /healthz answers and the workers run:
    the process, its port and every process of its tree."""
    port = helpers.free_port()
    process = subprocess.Popen(
        # a short grace: the qcluster's ticker holds its stop for ~10 s, and the SIGKILL is tested too
        [sys.executable, "manage.py", "serve", "--stop-grace", "2"],
        cwd=helpers.BASE_DIR,
        env=environment(var_dir, PORT=str(port), CLOUDPIVOT_WORKERS="2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # as a shell starts a command: serve leads the group Ctrl-C goes to
    )
    try:
        read_until(process, "CloudPivot is running", timeout=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            assert answer.status == 200
        # serve, the web process, the qcluster, its sentinel and at least its two workers
        helpers.wait_for(lambda: len(helpers.descendants([process.pid])) >= 6, timeout=30, what="the workers")
        time.sleep(1)  # the sentinel's monitor and pusher start beside the workers
    except BaseException:
        stop(process)
        raise
    return process, port, helpers.descendants([process.pid])


def survivors(tree: set[int]) -> list[str]:
    table = helpers.processes()
    return [f"{pid} {table[pid][2]}" for pid in sorted(tree) if pid in table and helpers.pid_alive(pid)]


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(lambda process: process.send_signal(signal.SIGTERM), id="SIGTERM"),
        pytest.param(lambda process: os.killpg(process.pid, signal.SIGINT), id="ctrl-c"),  # the terminal's group
    ],
)
def test_stopping_serve_stops_its_whole_process_tree(migrated, how):
    process, _, tree = serve_migrated(migrated)
    try:
        how(process)
        output, _ = process.communicate(timeout=30)
    finally:
        stop(process)
    assert process.returncode == 0, output
    assert not survivors(tree), output  # serve returns once every group it started is empty


def test_a_child_that_dies_stops_serve_and_every_other_process(migrated):
    """The qcluster's first process is killed: its sentinel and workers, left to init, go with its group."""
    process, _, tree = serve_migrated(migrated)
    table = helpers.processes()
    qcluster = next(pid for pid in tree if table[pid][0] == process.pid and "qcluster" in table[pid][2])
    try:
        os.kill(qcluster, signal.SIGKILL)
        output, _ = process.communicate(timeout=30)
    finally:
        stop(process)
    assert process.returncode == 1, output
    assert "stopped because qcluster exited" in output
    assert not survivors(tree), output
