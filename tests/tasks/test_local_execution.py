"""Tasks on the `local` cloud, end to end: a real host agent reporting to a real Daphne.

The test plays the worker: it runs reconcile passes (admission, retries, timeouts,
observation, cleanup) the way the ticker job does, and enqueued jobs run inline.
"""

from __future__ import annotations

import json
import time

import pytest

from tasks.models import Attempt, Task
from tasks.services import reconcile_pass, task_cancel
from tests import helpers
from tests.builders import hello_spec

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_command_runs_and_its_log_and_exit_code_are_kept(live, world):
    program = "import sys, time; print('hello'); sys.stdout.flush(); time.sleep(2); print('bye')"
    created = helpers.api_call(
        live.url, "POST", "/api/v1/tasks", world.tokens["bob"], hello_spec(command=["python3", "-c", program])
    )
    task = helpers.drive(Task.objects.get(pk=created["id"]), until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason
    path = f"/api/v1/tasks/{task.pk}"
    assert helpers.api_call(live.url, "GET", f"{path}/logs", world.tokens["bob"])["data"] == "hello\nbye\n"
    states = [
        e["data"]["to"]
        for e in helpers.api_call(live.url, "GET", f"{path}/events", world.tokens["bob"])["events"]
        if e["type"] == "state"
    ]
    assert states == ["SUBMITTING", "STARTING", "RUNNING", "SUCCEEDED"]
    attempt = helpers.api_call(live.url, "GET", f"{path}/attempts", world.tokens["bob"])["attempts"][0]
    assert attempt["exit_code"] == 0 and attempt["external_name"] == f"cp-{task.id.hex}-1"
    for phase in ("admitted_at", "cloud_created_at", "runner_contact_at", "program_started_at", "finished_at"):
        assert attempt[phase], phase
    # The attempt's cloud objects are cleaned up once the Runner is gone.
    helpers.wait_for(
        lambda: reconcile_pass() is not None and Attempt.objects.get(task=task).cleanup_state == "done", what="cleanup"
    )
    assert not (world.runs_dir / attempt["external_name"]).exists()


def test_a_failing_command_is_retried_with_backoff_then_fails(live, world):
    task, _ = _submit(world, command=["python3", "-c", "import sys; print('try'); sys.exit(3)"], retry_limit=2)
    task = helpers.drive(task, until={"FAILED", "SUCCEEDED", "UNKNOWN"}, timeout=40)
    assert task.state == "FAILED" and task.exit_code == 3
    attempts = list(task.attempts.order_by("number"))
    assert [a.exit_code for a in attempts] == [3, 3, 3]
    gaps = [(b.admitted_at - a.finished_at).total_seconds() for a, b in zip(attempts, attempts[1:], strict=False)]
    assert 0.9 <= gaps[0] < 3 and 1.9 <= gaps[1] < 4, gaps
    assert "exited with code 3" in task.state_reason


def test_cancel_stops_a_running_program_and_its_process_group(live, world):
    task, _ = _submit(world, command=["sleep", "600"])
    task = helpers.drive(task, until={"RUNNING"})
    program_pid = _program_pid(world, task)
    started = time.monotonic()
    task_cancel(task_id=task.pk, user=world.bob)
    task = helpers.drive(task, until={"CANCELLED", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "CANCELLED"
    assert time.monotonic() - started < 20  # stopped at once, not after the 600 s program (loose: shared CI machines)
    helpers.wait_for(lambda: not helpers.process_group_alive(program_pid), timeout=15, what="the process group to end")


def test_a_timeout_stops_the_program_and_ends_timed_out(live, world):
    task, _ = _submit(world, command=["sleep", "600"], timeout_seconds=2)
    task = helpers.drive(task, until={"TIMED_OUT", "FAILED", "CANCELLED", "UNKNOWN"}, timeout=30)
    assert task.state == "TIMED_OUT", task.state_reason
    assert "timeout of 2 s" in task.state_reason
    attempt = task.attempts.get()
    assert (attempt.finished_at - attempt.program_started_at).total_seconds() < 20  # 2 s timeout + grace, loosely


def test_a_program_that_ignores_sigterm_is_killed_after_the_grace_period(live, world):
    program = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
    )
    task, _ = _submit(world, command=["python3", "-c", program])
    task = helpers.drive(task, until={"RUNNING"})
    helpers.wait_for(lambda: "up" in _log(task), what="the program to be up")
    task_cancel(task_id=task.pk, user=world.bob)
    task = helpers.drive(task, until={"CANCELLED", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "CANCELLED"
    assert task.attempts.get().exit_signal == 9


def test_a_task_sets_its_own_grace_to_checkpoint_after_sigterm(live, world, tmp_path):
    """The installation's grace here is 2 s; the task asks for 8 and uses 3 of them to save its state."""
    checkpoint = tmp_path / "checkpoint"
    program = (
        "import signal, sys, time\n"
        "def save(*_):\n"
        f"    time.sleep(3); open({str(checkpoint)!r}, 'w').write('saved'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, save); print('up', flush=True); time.sleep(600)"
    )
    task, _ = _submit(world, command=["python3", "-c", program], stop_grace_seconds=8)
    task = helpers.drive(task, until={"RUNNING"})
    helpers.wait_for(lambda: "up" in _log(task), what="the program to be up")
    task_cancel(task_id=task.pk, user=world.bob)
    task = helpers.drive(task, until={"CANCELLED", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "CANCELLED"
    assert checkpoint.read_text() == "saved" and task.attempts.get().exit_signal is None


def test_tasks_wait_while_dispatch_is_off_saying_so_and_start_when_it_comes_on(live, world):
    world.local.dispatch_enabled = False
    world.local.save(update_fields=["dispatch_enabled"])
    task, _ = _submit(world, command=["python3", "-c", "print('ran')"])
    for _ in range(3):
        reconcile_pass()
        time.sleep(0.5)
    task.refresh_from_db()
    assert task.state == "PENDING" and task.attempts_count == 0
    assert task.state_reason == "waiting: dispatch is off on the local cloud until an admin turns it on"
    world.local.dispatch_enabled = True
    world.local.save(update_fields=["dispatch_enabled"])
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "SUCCEEDED" and _log(task) == "ran\n"


def test_a_missing_program_fails_with_a_clear_reason(live, world):
    task, _ = _submit(world, command=["no-such-program-xyz"])
    task = helpers.drive(task, until={"FAILED", "SUCCEEDED", "UNKNOWN"})
    assert task.state == "FAILED"
    assert "no-such-program-xyz" in (task.state_reason + _log(task))


def _submit(world, **spec):
    from tasks.services.submission import task_submit

    return task_submit(user=world.bob, document=hello_spec(**spec))


def _log(task: Task) -> str:
    from tasks.services.logs import log_read

    return log_read(task=task)["data"]


def _program_pid(world, task: Task) -> int:
    """The program's pid, which is also its process group (the host agent's supervisor writes program.json)."""
    state = world.runs_dir / task.attempts.get().external_name / "program.json"
    return helpers.wait_for(lambda: state.exists() and json.loads(state.read_text())["pid"], what="program.json")
