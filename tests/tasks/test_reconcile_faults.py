"""One bad task, attempt or connection never stops a reconcile pass, and the ticker always hands over.

Each trigger is real: a row that breaks a unique constraint, a task at the most attempts a
smallint holds, a local cloud whose files are not what the backend expects.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.db import transaction
from django.utils import timezone
from django_q.brokers import get_broker

from clusters.models import CloudConnection
from tasks.models import Attempt, Task
from tasks.services import reconcile_pass, ticker
from tasks.services.admission import admit_all
from tasks.services.attempts import attempt_close, attempt_create, current_attempt
from tasks.services.lifecycle import task_lock, task_transition
from tasks.services.reconcile import LOCAL_CLEANUP_GRACE_SECONDS
from tasks.services.submission import task_submit
from tests.builders import attempt_in_the_way, hello_spec


def submit(world, user=None, **extra) -> Task:
    return task_submit(user=user or world.bob, document=hello_spec(**extra))[0]


def twin(task: Task, hex_id: str) -> Task:
    """Another PENDING task like `task`, with the id given."""
    return Task.objects.create(
        id=uuid.UUID(hex_id),
        project=task.project,
        owner=task.owner,
        connection=task.connection,
        backend=task.backend,
        spec=task.spec,
        spec_sha256=task.spec_sha256,
        normalized=task.normalized,
    )


def errors_of(task: Task) -> list[str]:
    return list(task.events.filter(type="error").values_list("message", flat=True))


def test_tasks_whose_ids_share_their_first_eight_hex_digits_both_run(world):
    model = submit(world)
    Task.objects.filter(pk=model.pk).delete()
    first = twin(model, "1234abcd" + "0" * 24)
    second = twin(model, "1234abcd" + "f" * 24)
    assert admit_all() == 2
    names = sorted(Attempt.objects.values_list("external_name", flat=True))
    assert names == [f"cp-{first.id.hex}-1", f"cp-{second.id.hex}-1"]


def test_a_task_whose_attempt_cannot_be_stored_is_skipped_with_an_event_and_the_others_are_admitted(world):
    blocked, later = submit(world), submit(world, user=world.charlie)
    # A row in the way of the name `blocked` will ask for (as an old, colliding name once was).
    squatter = submit(world)
    attempt_in_the_way(squatter, of=blocked)
    Task.objects.filter(pk=squatter.pk).update(state="CANCELLED")
    done = reconcile_pass()
    assert done.get("admitted") == 1
    blocked.refresh_from_db(), later.refresh_from_db()
    assert (blocked.state, later.state) == ("PENDING", "SUBMITTING")
    [message] = errors_of(blocked)
    assert message.startswith("admission failed: IntegrityError")
    reconcile_pass()
    assert len(errors_of(blocked)) == 1, "the same error is written once, not every pass"


def test_a_task_at_the_most_attempts_a_smallint_holds_does_not_stop_the_others(world):
    stuck, fine = submit(world, retry_limit=1), submit(world, retry_limit=1)
    admit_all()
    for task in (stuck, fine):
        with transaction.atomic():
            locked = task_lock(task.pk)
            attempt_close(task=locked, attempt=current_attempt(locked), outcome="FAILED", reason="exit 1")
    Task.objects.filter(pk=stuck.pk).update(attempts_count=32767)
    Task.objects.update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    reconcile_pass()
    stuck.refresh_from_db(), fine.refresh_from_db()
    assert (stuck.state, fine.state) == ("RETRY_WAIT", "SUBMITTING")
    [message] = errors_of(stuck)
    assert message.startswith("retry failed: the task has had 32767 attempts")


@pytest.fixture
def vm_host(world, tmp_path, monkeypatch):
    """A connection whose attempts each run under their own host program, as in a VM (tests/vm_host.py): its files
    (a lock per attempt, a directory per attempt) are what these tests break on purpose."""
    from clusters.backends import BACKENDS

    monkeypatch.setitem(BACKENDS, "vm-host", "tests.vm_host.VmHostBackend")

    def make(cloud_id: str) -> CloudConnection:
        connection = CloudConnection.objects.create(
            cloud_id=cloud_id, backend="vm-host", options={"runs_dir": str(tmp_path / cloud_id)}
        )
        connection.projects.add(world.alpha)
        return connection

    return make


def running_attempt(world, connection: CloudConnection) -> Attempt:
    """A RUNNING task on `connection` whose Runner last reported 10 s ago (no process of it runs here)."""
    task = task_submit(user=world.bob, document=hello_spec(cloud=connection.cloud_id))[0]
    with transaction.atomic():
        locked = task_lock(task.pk)
        attempt = attempt_create(task=locked, reason="admitted")
        task_transition(task=locked, to="STARTING", reason="test")
        task_transition(task=locked, to="RUNNING", reason="test")
    quiet_since = timezone.now() - dt.timedelta(seconds=10)
    Attempt.objects.filter(pk=attempt.pk).update(
        external_ref="somewhere", cloud_created_at=quiet_since, last_heartbeat_at=quiet_since
    )
    return Attempt.objects.select_related("task").get(pk=attempt.pk)


def test_a_connection_whose_backend_raises_is_written_on_its_tasks_and_the_pass_goes_on(world, tmp_path, vm_host):
    broken = vm_host("broken")
    victim = running_attempt(world, broken)
    # The host program's lock file is a directory: the backend's observation raises IsADirectoryError.
    (tmp_path / "broken" / victim.external_name / "agent.lock").mkdir(parents=True)
    # A later step on a healthy connection: a closed attempt's leftovers to clean up (its host agent never
    # confirmed the cleanup within the grace period, so the pass does it).
    finished = running_attempt(world, world.local)
    with transaction.atomic():
        locked = task_lock(finished.task_id)
        attempt_close(task=locked, attempt=current_attempt(locked), outcome="SUCCEEDED", reason="done")
    long_ago = timezone.now() - dt.timedelta(seconds=LOCAL_CLEANUP_GRACE_SECONDS + 1)
    Attempt.objects.filter(pk=finished.pk).update(closed_at=long_ago)
    (world.runs_dir / finished.external_name).mkdir(parents=True)
    reconcile_pass()
    [message] = errors_of(victim.task)
    assert message.startswith("observing broken failed: IsADirectoryError")
    assert Attempt.objects.get(pk=finished.pk).cleanup_state == "done"
    assert not (world.runs_dir / finished.external_name).exists()


def test_one_attempt_whose_backend_call_fails_does_not_stop_the_others_of_its_connection(
    world, settings, tmp_path, vm_host
):
    settings.RUNNER_HEARTBEAT_SECONDS = 1
    hosts = vm_host("hosts")
    bad, good = running_attempt(world, hosts), running_attempt(world, hosts)
    # A file where the bad attempt's VM directory belongs: relaunching its host program fails (BackendError).
    (tmp_path / "hosts").mkdir(parents=True, exist_ok=True)
    (tmp_path / "hosts" / bad.external_name).write_text("not a directory")
    # The good one is past its timeout, and its host program is gone: the pass stops it, the next one ends it.
    Attempt.objects.filter(pk=good.pk).update(stop_requested_at=timezone.now(), stop_reason="timeout")
    done = reconcile_pass()
    reconcile_pass()
    [message] = errors_of(bad.task)
    assert message.startswith(f"acting on {bad.external_name} failed: could not start the host program")
    good.task.refresh_from_db()
    assert good.task.state == "TIMED_OUT", good.task.state_reason  # observed after the bad one: stopped, ended
    assert done.get("observed")


@pytest.mark.django_db(transaction=True)  # the lease committed: its renewal thread never waits on this test's lock
def test_the_ticker_hands_over_even_when_a_pass_raises(world, settings, monkeypatch):
    settings.TICKER_SECONDS = 0.2
    broker = get_broker()
    queued = broker.queue_size()

    def pass_that_raises(workers=None):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(ticker, "reconcile_pass", pass_that_raises)
    with pytest.raises(RuntimeError):
        ticker.ticker_run()
    assert broker.queue_size() == queued + 1, "no successor ticker was enqueued"
