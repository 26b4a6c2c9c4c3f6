"""The installed `cloudpivot` command, run in subprocesses against real servers on loopback.

Each test gets a config directory of its own (XDG_CONFIG_HOME), the alice/bob/… world, and, where
tasks must run, a real qcluster worker; the session Daphne serves the API unless a test needs one of
its own to kill and start again.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command

from tests import helpers
from tests.cli.support import BIN, Cli
from tests.plugins.servers import kill_leftover_runners


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
        # The development install may be another checkout's (worktrees share one virtualenv): the CLI under test
        # is this checkout's.
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "cli" / "src"),
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
    kill_leftover_runners(world.runs_dir)


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
