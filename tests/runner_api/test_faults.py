"""A task VM's host program under faults: real processes, a real Daphne that goes away and comes back.

The host program runs here as in a VM, one per attempt with the attempt's credential, through a test backend
(tests/vm_host.py). The `local` host agent's own fault tests (many attempts per agent) are in test_agent_faults.py.

Each program writes a known byte sequence, so "nothing lost, nothing twice" is checked
byte for byte; events are checked by the task's history and the attempt's acked seq.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tasks.services import reconcile_pass
from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec as local_spec
from tests.runner_api.support import LINES, expected_lines, state_changes, with_vm_host
from tests.vm_host import parent_pid, program_pid

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(world, tmp_path, monkeypatch):
    return with_vm_host(world, tmp_path, monkeypatch)


def hello_spec(**extra):
    return local_spec(**extra) | {"cloud": "vm-host"}


def test_a_20_s_server_outage_loses_nothing_and_duplicates_nothing(server, world):
    task, _ = task_submit(
        user=world.bob, document=hello_spec(command=["python3", "-c", LINES.format(n=300, pause=0.1)])
    )
    helpers.drive(task, {"RUNNING"}, timeout=20)
    helpers.wait_for(lambda: log_read(task=task)["next_offset"] > 2000, what="some output before the outage")
    server.stop()
    outage_started = time.monotonic()
    while time.monotonic() - outage_started < 20:  # the reconciler goes on meanwhile, as a worker would
        reconcile_pass()
        time.sleep(0.5)
    server.start()
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=60)
    assert task.state == "SUCCEEDED", task.state_reason
    assert log_read(task=task, limit=10**7)["data"] == expected_lines(300)
    assert state_changes(task) == ["SUBMITTING", "STARTING", "RUNNING", "SUCCEEDED"]
    attempt = task.attempts.get()
    assert attempt.acked_seq == 2  # started, exited: each applied once


def test_a_host_program_killed_mid_run_is_restarted_and_re_attaches(server, world):
    program = LINES.format(n=60, pause=0.1) + "sys.exit(7)\n"
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["python3", "-c", program]))
    helpers.drive(task, {"RUNNING"}, timeout=20)
    state_dir = world.runs_dir / task.attempts.get().external_name
    first_runner = int((state_dir / "runner.pid").read_text())
    helpers.wait_for(lambda: log_read(task=task)["next_offset"] > 500, what="some output")
    os.kill(first_runner, signal.SIGKILL)
    task = helpers.drive(task, {"FAILED", "SUCCEEDED", "UNKNOWN"}, timeout=40)
    assert task.attempts.get().runner_pid not in (None, first_runner)  # a new host program finished the job
    assert task.state == "FAILED" and task.exit_code == 7, task.state_reason
    assert log_read(task=task, limit=10**7)["data"] == expected_lines(60)
    assert state_changes(task) == ["SUBMITTING", "STARTING", "RUNNING", "FAILED"]
    assert task.attempts.get().acked_seq == 2


def test_a_silent_host_program_makes_the_task_unknown_and_its_return_verifies_it(server, world, settings):
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 3
    program = "import time; print('up', flush=True); time.sleep(8); print('done')"
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["python3", "-c", program]))
    helpers.drive(task, {"RUNNING"}, timeout=20)
    runner = int((world.runs_dir / task.attempts.get().external_name / "runner.pid").read_text())
    os.kill(runner, signal.SIGSTOP)  # alive (it holds its lock) but silent, like a cut-off VM
    try:
        task = helpers.drive(task, {"UNKNOWN"}, timeout=30)
        assert "no word from the Runner" in task.state_reason and "still runs" in task.state_reason
        assert task.attempts_count == 1
    finally:
        os.kill(runner, signal.SIGCONT)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED"}, timeout=30)
    assert task.state == "SUCCEEDED"
    assert state_changes(task)[-3:] == ["UNKNOWN", "RUNNING", "SUCCEEDED"]
    assert log_read(task=task)["data"] == "up\ndone\n"


def test_a_program_killed_behind_the_host_programs_back_is_reported_lost(server, world):
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["sleep", "600"]))
    helpers.drive(task, {"RUNNING"}, timeout=20)
    name = task.attempts.get().external_name
    state_dir = world.runs_dir / name
    os.kill(int((state_dir / "runner.pid").read_text()), signal.SIGKILL)
    program = program_pid(state_dir, name)
    os.kill(parent_pid(program), signal.SIGKILL)  # its supervisor first: nobody is left to write its exit
    os.killpg(program, signal.SIGKILL)
    task = helpers.drive(task, {"UNKNOWN", "FAILED", "SUCCEEDED"}, timeout=30)
    assert task.state == "UNKNOWN", task.state_reason
    assert "lost" in task.state_reason and task.attempts_count == 1
