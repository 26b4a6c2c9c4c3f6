"""What the fault tests of the Runner (v1) and of the host agent share: a Daphne they may stop, and
programs that write a known byte sequence, so "nothing lost, nothing twice" is checked byte for byte."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest

from tasks.models import Task
from tests import helpers

LINES = (
    "import sys, time\nfor i in range({n}):\n    print('line %05d ' % i + 'x' * 90, flush=True)\n"
    "    time.sleep({pause})\n"
)


def expected_lines(n: int) -> str:
    return "".join(f"line {i:05d} " + "x" * 90 + "\n" for i in range(n))


def state_changes(task: Task) -> list[str]:
    return list(task.events.filter(type="state").values_list("data__to", flat=True))


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
    from tests.conftest import _kill_leftover_runners

    _kill_leftover_runners(tmp_path)
