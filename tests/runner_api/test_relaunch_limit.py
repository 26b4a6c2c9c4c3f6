"""A Runner that cannot stay up is started again a bounded number of times (RUNNER_RELAUNCH_LIMIT), not
every pass for ever: then what is left of the program is stopped and the attempt ends FAILED, in words.
Real Runner processes and a real Daphne (the test backend runs one Runner per attempt on this host)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pytest

from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec as local_spec
from tests.runner_api.support import with_runner_host

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(world, tmp_path, monkeypatch):
    return with_runner_host(world, tmp_path, monkeypatch)


def test_a_runner_that_cannot_stay_up_is_relaunched_a_bounded_number_of_times_then_fails(server, world, settings):
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 4.0
    settings.RUNNER_RELAUNCH_LIMIT = 2
    document = local_spec(command=["sleep", "120"]) | {"cloud": "runner-host"}
    task, _ = task_submit(user=world.bob, document=document)
    helpers.drive(task, {"RUNNING"}, timeout=30)
    state_dir = world.runs_dir / task.attempts.get().external_name
    state_file = state_dir / "state.json"
    helpers.wait_for(lambda: state_file.exists() and "shim_pid" in state_file.read_text(), what="the program's pid")
    shim = json.loads((state_dir / "state.json").read_text())["shim_pid"]
    os.kill(int((state_dir / "runner.pid").read_text()), signal.SIGKILL)
    time.sleep(0.2)
    # The state directory breaks under it: every new Runner dies at start (its outbox cannot be a file).
    shutil.rmtree(state_dir / "outbox")
    (state_dir / "outbox").write_text("not a directory")

    task = helpers.drive(task, {"FAILED", "SUCCEEDED", "CANCELLED"}, timeout=60, interval=0.3)
    assert task.state == "FAILED", task.state_reason
    assert "its Runner, started again 2 times, never stayed up" in task.state_reason
    relaunches = list(task.events.filter(type="runner_relaunched").values_list("message", flat=True))
    assert relaunches == [
        "the Runner was not running; started it again (1 of 2)",
        "the Runner was not running; started it again (2 of 2)",
    ]
    states = list(task.events.filter(type="state").values_list("data__to", flat=True))
    assert states[-2:] == ["UNKNOWN", "FAILED"]
    helpers.wait_for(lambda: not helpers.process_group_alive(int(shim)), timeout=10, what="the program to be stopped")
