"""Cancel at every state: each ends CANCELLED within seconds and gives its quota back.

The states are reached the way the services reach them (admission, the start job, the
reconcile pass) on the `local` cloud; no Runner runs unless the test says so.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.db import transaction
from django.utils import timezone

from cloudpivot.accounts.models import Quota
from clusters.models import CloudConnection
from tasks.models import Attempt, Task
from tasks.selectors import task_quota_usage
from tasks.services import reconcile_pass, task_cancel
from tasks.services.admission import admit_all
from tasks.services.attempts import attempt_close, attempt_start, current_attempt
from tasks.services.lifecycle import task_lock, task_transition
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec


@pytest.fixture
def one_slot(world):
    """alpha may hold one task on `local`: a cancelled task that kept its slot would block the next one."""
    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=1)


def submit(world) -> Task:
    return task_submit(user=world.bob, document=hello_spec(command=["sleep", "600"]))[0]


def admitted(world) -> Task:
    task = submit(world)
    assert admit_all() == 1
    task.refresh_from_db()
    assert task.state == "SUBMITTING"
    return task


def move(task: Task, to: str, **attempt_fields) -> Task:
    """The task to `to`, its attempt with `attempt_fields`, as the start job and the reconciler would leave them."""
    with transaction.atomic():
        locked = task_lock(task.pk)
        if attempt_fields:
            Attempt.objects.filter(task=locked).update(**attempt_fields)
        task_transition(task=locked, to=to, reason="test")
    task.refresh_from_db()
    return task


def started(world, task: Task) -> Task:
    """STARTING: the cloud was asked (the execution's place is recorded), but no Runner reported yet."""
    name = task.attempts.get().external_name
    return move(task, "STARTING", external_ref=str(world.runs_dir / name), cloud_created_at=timezone.now())


def cancel_ends_it(world, task: Task, *, within: float = 5) -> Task:
    """Cancel, then run passes as the ticker does; the task must end CANCELLED in `within` s and free its slot."""
    began = time.monotonic()
    task_cancel(task_id=task.pk, user=world.bob)
    helpers.drive(task, until={"CANCELLED", "SUCCEEDED", "FAILED", "UNKNOWN", "TIMED_OUT"}, timeout=within)
    assert task.state == "CANCELLED", task.state_reason
    assert time.monotonic() - began < within
    assert task_quota_usage(project_id=world.alpha.pk, connection_id=world.local.pk).tasks == 0
    assert all(a.is_closed for a in task.attempts.all())
    following = submit(world)
    assert admit_all() == 1, "the cancelled task still holds the project's only slot"
    following.refresh_from_db()
    assert following.state == "SUBMITTING"
    return task


def test_cancel_a_pending_task(world, one_slot):
    task = submit(world)
    cancel_ends_it(world, task)


def test_cancel_a_submitting_task_before_its_start_job_runs(world, one_slot):
    task = admitted(world)
    cancel_ends_it(world, task)
    # The start job, when it finally runs, starts nothing.
    assert "nothing to start" in attempt_start(attempt_id=task.attempts.get().pk)
    assert not (world.runs_dir / task.attempts.get().external_name).exists()


def test_cancel_during_a_failed_start(world, one_slot, tmp_path):
    world.local.options = {"runs_dir": str(tmp_path / "not-a-directory")}
    world.local.save()
    (tmp_path / "not-a-directory").write_text("the Runner's directory cannot be made here")
    task = admitted(world)
    assert "start failed" in attempt_start(attempt_id=task.attempts.get().pk)
    task.refresh_from_db()
    assert task.state == "SUBMITTING" and task.events.filter(type="start_error").exists()
    cancel_ends_it(world, task)


def test_cancel_a_starting_task_whose_runner_never_reported(world, one_slot):
    task = started(world, admitted(world))
    cancel_ends_it(world, task)


def test_cancel_a_running_task_whose_runner_is_gone(world, one_slot):
    task = move(started(world, admitted(world)), "RUNNING", program_started_at=timezone.now())
    cancel_ends_it(world, task)


def test_cancel_a_task_waiting_to_retry(world, one_slot):
    task = admitted(world)
    Task.objects.filter(pk=task.pk).update(retry_limit=1)
    with transaction.atomic():
        locked = task_lock(task.pk)
        attempt_close(task=locked, attempt=current_attempt(locked), outcome="FAILED", reason="exit 1")
    task.refresh_from_db()
    assert task.state == "RETRY_WAIT"
    cancel_ends_it(world, task)


def test_cancel_an_unknown_task_whose_runner_went_silent(world, one_slot):
    task = started(world, admitted(world))
    quiet_since = timezone.now() - dt.timedelta(seconds=120)
    task = move(task, "UNKNOWN", cloud_created_at=quiet_since, last_heartbeat_at=quiet_since)
    cancel_ends_it(world, task)


def test_cancel_an_unknown_task_whose_attempt_was_lost(world, one_slot):
    task = started(world, admitted(world))
    with transaction.atomic():
        locked = task_lock(task.pk)
        attempt = current_attempt(locked)
        attempt_close(task=locked, attempt=attempt, outcome="UNKNOWN", reason="the execution vanished", lost=True)
    task.refresh_from_db()
    assert task.state == "UNKNOWN"
    cancel_ends_it(world, task)


def test_a_task_left_cancelling_by_an_earlier_version_is_ended_by_the_pass(world, one_slot):
    task = admitted(world)
    task = move(task, "CANCELLING", stop_requested_at=timezone.now(), stop_reason="cancel")
    helpers.drive(task, until={"CANCELLED"}, timeout=5)
    assert task_quota_usage(project_id=world.alpha.pk, connection_id=world.local.pk).tasks == 0


@pytest.mark.django_db(transaction=True)
def test_cancel_while_the_start_is_asking_the_cloud(live, world, monkeypatch, tmp_path):
    """The cancel lands while the pass's start waits for the cloud: what the cloud made is recorded, stopped, removed.

    On a connection whose start makes a process of its own per attempt (tests/vm_host.py), so "what the
    cloud made" is a process this test can watch.
    """
    from clusters.backends import BACKENDS
    from tests.vm_host import VmHostBackend

    monkeypatch.setitem(BACKENDS, "vm-host", "tests.vm_host.VmHostBackend")
    hosts = CloudConnection.objects.create(
        cloud_id="vm-host", backend="vm-host", options={"runs_dir": str(tmp_path / "hosts")}
    )
    hosts.projects.add(world.alpha)
    task = task_submit(user=world.bob, document=hello_spec(cloud="vm-host", command=["sleep", "600"]))[0]
    assert admit_all() == 1  # this test plays the reconcile pass: admission, then the start
    attempt = Attempt.objects.get(task=task)
    state_dir = tmp_path / "hosts" / attempt.external_name
    launch, pids = VmHostBackend.ensure_started, []

    def cancelled_meanwhile(backend, ref):
        made = launch(backend, ref)  # the real launch: a Runner process starts
        pids.append(int((state_dir / "runner.pid").read_text()))
        task_cancel(task_id=task.pk, user=world.bob)  # ... and the user cancels before the start job records it
        return made

    monkeypatch.setattr(VmHostBackend, "ensure_started", cancelled_meanwhile)
    attempt_start(attempt_id=attempt.pk)
    task.refresh_from_db()
    assert task.state == "CANCELLED"
    assert task.attempts.get().external_ref == str(state_dir)  # recorded though closed, so cleanup knows it
    helpers.wait_for(lambda: not helpers.process_group_alive(pids[0]), timeout=15, what="the late Runner to be stopped")
    helpers.wait_for(
        lambda: reconcile_pass() is not None and not state_dir.exists(), timeout=15, what="the late start's cleanup"
    )
    assert task.attempts.get().cleanup_state == "done"


def test_a_runner_that_reported_before_its_start_was_recorded_gets_the_stop_window_then_the_attempt_closes(
    world, one_slot, settings
):
    settings.STOP_WINDOW_SECONDS = 1
    task = move(admitted(world), "RUNNING", runner_contact_at=timezone.now(), program_started_at=timezone.now())
    task_cancel(task_id=task.pk, user=world.bob)
    task.refresh_from_db()
    assert task.state == "CANCELLING"  # the Runner is asked first: it stops the program and says how it ended
    assert Attempt.objects.get(task=task).stop_requested_at
    helpers.drive(task, until={"CANCELLED"}, timeout=5)  # it did not: closed after the stop window
    assert task_quota_usage(project_id=world.alpha.pk, connection_id=world.local.pk).tasks == 0
