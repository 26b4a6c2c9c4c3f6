"""Real servers on loopback: a Daphne serving the API and the Runner API, and a worker thread beside it."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection
from django_q.conf import Conf

from tests import helpers


@pytest.fixture(scope="session")
def server_logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("server-logs")


@pytest.fixture(scope="session")
def daphne(django_db_setup, django_db_blocker, tmp_path_factory, server_logs):
    """A real Daphne serving the API and the Runner API on the test database."""
    port = helpers.free_port()
    runs_dir = tmp_path_factory.mktemp("daphne-runs")
    env = helpers.server_environment(port=port, runs_dir=runs_dir)
    process = helpers.start_daphne(port=port, env=env, log=server_logs / "daphne.log")
    yield SimpleNamespace(
        url=f"http://127.0.0.1:{port}", port=port, env=env, process=process, log=server_logs / "daphne.log"
    )
    helpers.stop_process_group(process)


@pytest.fixture
def live(transactional_db, daphne, settings, tmp_path, monkeypatch):
    """Runners started by this process report to the real Daphne; enqueued jobs run inline here.

    The reconcile loop itself is driven by the test (`drive`), as a worker would.
    """
    settings.RUNNER_SERVER_URL = daphne.url
    settings.RUNNER_HEARTBEAT_SECONDS = 0.5
    settings.STOP_GRACE_SECONDS = 2.0
    monkeypatch.setattr(Conf, "SYNC", True)
    yield daphne
    kill_leftover_runners(tmp_path)


@pytest.fixture
def worker(live):
    """Reconcile passes every 0.2 s in a background thread, as the ticker job does in a worker."""
    from tasks.services import reconcile_pass

    stop = threading.Event()
    errors: list[BaseException] = []

    def loop():
        try:
            while not stop.is_set():
                try:
                    reconcile_pass()
                except Exception as exc:  # reported at teardown; the loop goes on like a worker would
                    errors.append(exc)
                stop.wait(0.2)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, name="reconcile-worker", daemon=True)
    thread.start()
    yield live
    stop.set()
    thread.join(timeout=30)
    assert not errors, errors


def kill_leftover_runners(root: Path) -> None:
    """A failed test must not leave Runners, host agents or programs behind to disturb the next one."""
    for lock in root.rglob("agent.lock"):
        text = lock.read_text().strip()
        if text.isdigit():
            try:
                os.kill(int(text), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for program in root.rglob("program.json"):
        try:
            os.killpg(int(json.loads(program.read_text())["pid"]), signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass
    for pid_file in list(root.rglob("runner.pid")) + list(root.rglob("state.json")):
        try:
            text = pid_file.read_text()
            pids = (
                [int(text)]
                if pid_file.name == "runner.pid"
                else [int(v) for k, v in json.loads(text).items() if k.endswith("pid") and v]
            )
        except (OSError, ValueError):
            continue
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    time.sleep(0.1)
