"""The installed `cloudpivot` command, run in subprocesses against real servers on loopback.

Each test gets a config directory of its own (XDG_CONFIG_HOME), the alice/bob/… world, and, where
tasks must run, a real qcluster worker; the session Daphne serves the API unless a test needs one of
its own to kill and start again.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command

from tests import helpers
from tests.conftest import _kill_leftover_runners

BIN = Path(sys.executable).parent / "cloudpivot"


class Cli:
    """Runs `cloudpivot …` as a user would, with this test's config dir and the given environment."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home = home
        self.env = env

    def environment(self, **extra: str) -> dict[str, str]:
        return self.env | extra

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120, **extra: str):
        return subprocess.run(
            [str(BIN), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.environment(**extra),
        )

    def start(self, *args: str, **extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(BIN), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.environment(**extra),
            start_new_session=True,
        )

    def json(self, *args: str, **extra: str):
        done = self(*args, "-o", "json", **extra)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def cli(tmp_path) -> Cli:
    if not BIN.exists():
        pytest.fail(f"{BIN} is missing: `pip install -e ./cli` (requirements/dev.txt installs it)")
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("CLOUDPIVOT_", "DJANGO_"))}
    env |= {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "CLOUDPIVOT_POLL_SECONDS": "0.2",
        "CLOUDPIVOT_RETRY_SECONDS": "60",
    }
    return Cli(home, env)


@pytest.fixture
def logged_in(cli, daphne, world) -> Cli:
    """bob, logged in to the session Daphne (his config file, as `cloudpivot login` writes it)."""
    done = cli("login", "--url", daphne.url, "--token", world.tokens["bob"])
    assert done.returncode == 0, done.stderr
    return cli


@pytest.fixture
def worker(daphne, server_logs, world):
    """A real qcluster on the test database with the schedules `serve` would set up."""
    call_command("sync_schedules", verbosity=0)
    process = helpers.start_qcluster(env=daphne.env, log=server_logs / "qcluster-cli.log")
    yield process
    helpers.stop_process_group(process, sig=signal.SIGKILL)  # its jobs are idempotent; a graceful stop takes 15 s
    _kill_leftover_runners(world.runs_dir)


@pytest.fixture
def own_server(transactional_db, tmp_path, server_logs):
    """A Daphne of this test's own on a fixed port, that the test may kill and start again."""
    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "own-runs")
    log = server_logs / f"daphne-cli-{port}.log"
    box = SimpleNamespace(port=port, url=f"http://127.0.0.1:{port}", process=None)
    box.start = lambda: setattr(box, "process", helpers.start_daphne(port=port, env=env, log=log))
    box.stop = lambda: box.process and helpers.stop_process_group(box.process, sig=signal.SIGKILL)
    box.start()
    yield box
    box.stop()


class Lines:
    """A child's output pipe read line by line in a thread, so a test can wait for one line with a deadline
    and later take all the rest (nothing lost between the two, whatever the pipe's buffering)."""

    def __init__(self, stream):
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.queue.put(line)
        self.queue.put(None)

    def next(self, *, timeout: float = 60) -> str:
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout} s") from None
        assert line is not None, "the output ended"
        return line

    def rest(self, *, timeout: float = 120) -> str:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the output did not end within {timeout} s"
        lines = []
        while (line := self.queue.get_nowait()) is not None:
            lines.append(line)
        return "".join(lines)


def spec_file(directory: Path, name: str, document: dict | str) -> Path:
    path = directory / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path
