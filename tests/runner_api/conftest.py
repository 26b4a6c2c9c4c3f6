"""What the tests of the host program share: a Daphne they may stop, and an agent's HTTP client (the programs
they run and the v2 helpers are in tests/runner_api/support.py)."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
from rest_framework.test import APIClient

from cloudpivot import credentials
from clusters.backends.local import agent_name, connection_runs_dir
from tests import helpers
from tests.plugins.servers import kill_leftover_runners


@pytest.fixture
def server(transactional_db, settings, tmp_path, server_logs, monkeypatch):
    """A Daphne of this test's own, on a fixed port, that the test may stop and start again."""
    from django_q.conf import Conf

    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs")
    log = server_logs / f"daphne-{port}.log"
    box = SimpleNamespace(
        port=port, url=f"http://127.0.0.1:{port}", process=helpers.start_daphne(port=port, env=env, log=log)
    )
    box.stop = lambda: helpers.stop_process_group(box.process, sig=signal.SIGKILL)
    box.start = lambda: setattr(box, "process", helpers.start_daphne(port=port, env=env, log=log))
    settings.RUNNER_SERVER_URL = box.url
    settings.RUNNER_HEARTBEAT_SECONDS = 0.5
    settings.STOP_GRACE_SECONDS = 2.0
    monkeypatch.setattr(Conf, "SYNC", True)
    yield box
    box.stop()
    kill_leftover_runners(tmp_path)


@pytest.fixture
def agent(world):
    """An HTTP client holding the agent credential of the world's `local` connection."""
    name = agent_name(connection_runs_dir(world.local))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {credentials.agent_credential(name=name)}")
    client.agent_name = name
    return client
