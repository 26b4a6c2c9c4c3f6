"""A task VM's host program that cannot stay up is started again a bounded number of times
(RUNNER_RELAUNCH_LIMIT), not every pass for ever: then what is left of the program is stopped and the attempt
ends FAILED, in words. Real processes and a real Daphne (tests/vm_host.py: one host program per attempt)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec as local_spec
from tests.runner_api.support import with_vm_host
from tests.vm_host import program_pid

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(world, tmp_path, monkeypatch):
    return with_vm_host(world, tmp_path, monkeypatch)


def test_a_host_program_that_cannot_stay_up_is_relaunched_a_bounded_number_of_times_then_fails(server, world, settings):
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 4.0
    settings.RUNNER_RELAUNCH_LIMIT = 2
    document = local_spec(command=["sleep", "120"]) | {"cloud": "vm-host"}
    task, _ = task_submit(user=world.bob, document=document)
    helpers.drive(task, {"RUNNING"}, timeout=30)
    name = task.attempts.get().external_name
    state_dir = world.runs_dir / name
    helpers.wait_for(lambda: program_pid(state_dir, name), what="the program's pid")
    program = program_pid(state_dir, name)
    # A host that kills it (say, the OOM killer): every host program of this VM dies as soon as it is there.
    killing = threading.Event()
    killer = threading.Thread(target=kill_every_host_program, args=(state_dir, killing))
    killer.start()
    try:
        task = helpers.drive(task, {"FAILED", "SUCCEEDED", "CANCELLED"}, timeout=60, interval=0.3)
    finally:
        killing.set()
        killer.join()
    assert task.state == "FAILED", task.state_reason
    assert "its Runner, started again 2 times, never stayed up" in task.state_reason
    relaunches = list(task.events.filter(type="runner_relaunched").values_list("message", flat=True))
    assert relaunches == [
        "the Runner was not running; started it again (1 of 2)",
        "the Runner was not running; started it again (2 of 2)",
    ]
    states = list(task.events.filter(type="state").values_list("data__to", flat=True))
    assert states[-2:] == ["UNKNOWN", "FAILED"]
    helpers.wait_for(lambda: not helpers.process_group_alive(program), timeout=10, what="the program to be stopped")


def kill_every_host_program(state_dir, until: threading.Event) -> None:
    while not until.wait(0.05):
        try:
            os.kill(int((state_dir / "runner.pid").read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
