"""Container tasks on a Kubernetes connection, end to end through CloudPivot.

The real `kubernetes` client talks HTTP to the loopback API server (tests/clusters/kube_fixture.py);
the test plays the kubelet (pod status, logs) and the worker (reconcile passes, jobs run inline). The
submission rings the reconcile doorbell; here the test runs the pass it would wake, which admits and
starts the task in one go.
"""

from __future__ import annotations

import pytest
from django_q.conf import Conf

from clusters.backends import get_backend
from tasks.models import Attempt, Task
from tasks.services import reconcile_pass, task_cancel
from tasks.services.admission import admit_all
from tasks.services.attempts import attempt_ref
from tasks.services.logs import log_copy_from_cloud, log_read
from tasks.services.submission import task_submit
from tests import helpers
from tests.clusters.kube_api import JOBS
from tests.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def inline_jobs(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def submit(world, *, start: bool = True, **spec) -> Task:
    """Submit; then the pass the doorbell wakes (admission and start), or only admission with start=False."""
    document = {"cloud": "k3s-lab", "image": "python:3.12-slim", "command": ["python3", "-c", "print('hi')"], **spec}
    task, _ = task_submit(user=world.bob, document=document)
    if start:
        reconcile_pass()
    else:
        admit_all()
    return task


def job_name(task: Task) -> str:
    return f"cp-{task.id.hex}-1"


def state_history(task: Task) -> list[str]:
    return [e.data["to"] for e in task.events.filter(type="state").order_by("seq")]


def test_a_container_task_runs_and_its_log_outlives_the_pod(kube, kube_connection, world, inline_jobs):
    task = submit(world, command=["python3", "-c", "print('hello; $HOME')"], env={"GREETING": "hi"})
    task.refresh_from_db()
    assert task.state == "STARTING"
    name = job_name(task)
    attempt = task.attempts.get()
    assert attempt.external_ref == kube.jobs()[name]["metadata"]["uid"]

    kube.schedule(name)
    task = helpers.drive(task, until={"STARTING"})
    kube.run(name)
    kube.log(name, "hello; $HOME\n")
    task = helpers.drive(task, until={"RUNNING"})
    wait_for(lambda: reconcile_pass() is not None and "hello" in log_read(task=task)["data"], what="log copy")
    kube.log(name, "second line\nno newline at the end")
    kube.finish(name, 0)
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})

    assert task.state == "SUCCEEDED", task.state_reason
    assert task.exit_code == 0
    assert state_history(task) == ["SUBMITTING", "STARTING", "RUNNING", "SUCCEEDED"]
    # Cleanup deleted the Job and (Background propagation) its pod; the log is still in CloudPivot.
    wait_for(lambda: Attempt.objects.get(pk=attempt.pk).cleanup_state == "done", what="cleanup")
    assert name not in kube.jobs()
    assert kube.call(lambda: kube.api.pods_of("tasks", name)) == []
    assert log_read(task=task)["data"] == "hello; $HOME\nsecond line\nno newline at the end"
    attempt.refresh_from_db()
    assert attempt.cloud_created_at and attempt.program_started_at and attempt.finished_at


def test_two_passes_copying_the_same_log_store_it_once(kube, kube_connection, world, inline_jobs):
    """Two reconcile passes that overlap (or one replaced after its worker died) read the log from the same
    cursor: the second one's copy must be dropped, not appended (the 1,000-task soak saw logs 2-3 x)."""
    task = submit(world)
    name = job_name(task)
    kube.schedule(name)
    kube.run(name)
    kube.log(name, "once\n")
    backend = get_backend(kube_connection)
    first, second = Attempt.objects.get(task=task), Attempt.objects.get(task=task)  # both read before either copies
    for attempt in (first, second):
        ref = attempt_ref(attempt)
        backend.observe([ref])
        log_copy_from_cloud(backend, attempt, ref)
    assert log_read(task=task)["data"] == "once\n"
    assert second.log_cursor == first.log_cursor == Attempt.objects.get(pk=first.pk).log_cursor
    kube.log(name, "twice\n")
    log_copy_from_cloud(backend, second, attempt_ref(second))  # the loser goes on from the stored cursor
    assert log_read(task=task)["data"] == "once\ntwice\n"


@pytest.mark.parametrize(
    ("act", "exit_code", "words"),
    [
        (lambda kube, name: kube.finish(name, 3), 3, "the program exited with code 3"),
        (lambda kube, name: kube.finish(name, 137, "OOMKilled"), 137, "OOMKilled: the container ran out of memory"),
    ],
    ids=["exit-code", "oom-killed"],
)
def test_a_failing_container_ends_failed_with_a_reason_in_words(
    kube, kube_connection, world, inline_jobs, act, exit_code, words
):
    task = submit(world, resources={"memory_mb": 64})
    name = job_name(task)
    kube.run(name)
    task = helpers.drive(task, until={"RUNNING"})
    act(kube, name)
    task = helpers.drive(task, until={"FAILED", "SUCCEEDED", "UNKNOWN", "RETRY_WAIT"})
    assert task.state == "FAILED"
    assert words in task.state_reason
    assert task.exit_code == exit_code
    assert words in task.attempts.get().failure_reason


def test_an_image_that_cannot_be_pulled_fails_after_the_grace_period(kube, kube_connection, world, inline_jobs):
    kube_connection.options = kube_connection.options | {"image_pull_grace_seconds": 2}
    kube_connection.save()
    task = submit(world, image="registry.example/nope:1")
    name = job_name(task)
    kube.image_pull_backoff(name)
    wait_for(
        lambda: (
            reconcile_pass() is not None
            and task.events.filter(type="observed", message__contains="keeps trying").exists()
        ),
        what="the pull failure to be reported while Kubernetes retries",
    )
    task.refresh_from_db()
    assert task.state == "STARTING"  # still within the grace period
    task = helpers.drive(task, until={"FAILED", "SUCCEEDED", "UNKNOWN"})
    assert task.state == "FAILED"
    assert "the image registry.example/nope:1 cannot be pulled (ImagePullBackOff" in task.state_reason


def test_an_unschedulable_task_says_why_it_waits_and_can_be_cancelled(kube, kube_connection, world, inline_jobs):
    task = submit(world, resources={"cpu": 64})
    name = job_name(task)
    kube.unschedulable(name)
    wait_for(
        lambda: (
            reconcile_pass() is not None
            and task.events.filter(
                type="observed", message__contains="waiting for a node: 0/3 nodes are available"
            ).exists()
        ),
        what="the scheduling problem to be reported",
    )
    task.refresh_from_db()
    assert task.state == "STARTING"
    task_cancel(task_id=task.pk, user=world.bob)
    task = helpers.drive(task, until={"CANCELLED", "FAILED", "UNKNOWN"})
    assert task.state == "CANCELLED"
    assert name not in kube.jobs()


def test_cancel_deletes_the_job_and_ends_cancelled(kube, kube_connection, world, inline_jobs):
    task = submit(world, command=["sleep", "600"])
    name = job_name(task)
    kube.run(name)
    task = helpers.drive(task, until={"RUNNING"})
    task_cancel(task_id=task.pk, user=world.bob)
    task.refresh_from_db()
    assert task.state == "CANCELLING"
    assert name not in kube.jobs()  # the stop job ran at once (inline) and deleted the Job
    assert kube.call(lambda: kube.api.pods_of("tasks", name)) == []
    task = helpers.drive(task, until={"CANCELLED", "FAILED", "UNKNOWN"})
    assert task.state == "CANCELLED"
    assert "stopped" in task.state_reason


def test_a_job_past_its_deadline_ends_timed_out(kube, kube_connection, world, inline_jobs):
    task = submit(world, command=["sleep", "600"], timeout_seconds=600)
    name = job_name(task)
    assert kube.jobs()[name]["spec"]["activeDeadlineSeconds"] == 600
    kube.run(name)
    task = helpers.drive(task, until={"RUNNING"})
    kube.expire_deadline(name)
    task = helpers.drive(task, until={"TIMED_OUT", "FAILED", "UNKNOWN"})
    assert task.state == "TIMED_OUT"
    assert "deadline of 600 s" in task.state_reason


def test_cloudpivots_own_timeout_stops_the_job_and_ends_timed_out(kube, kube_connection, world, inline_jobs):
    task = submit(world, command=["sleep", "600"], timeout_seconds=1)
    name = job_name(task)
    kube.run(name)
    task = helpers.drive(task, until={"TIMED_OUT", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "TIMED_OUT"
    assert name not in kube.jobs()


@pytest.mark.parametrize("vanish", ["pod", "job"])
def test_a_vanished_pod_or_job_makes_the_task_unknown(kube, kube_connection, world, inline_jobs, vanish):
    task = submit(world, command=["sleep", "600"])
    name = job_name(task)
    kube.run(name)
    task = helpers.drive(task, until={"RUNNING"})
    if vanish == "pod":
        kube.delete_pod(name)
    else:
        kube.call(lambda: kube.api.system("DELETE", f"/apis/batch/v1/namespaces/tasks/jobs/{name}"))
    task = helpers.drive(task, until={"UNKNOWN", "FAILED", "SUCCEEDED"})
    assert task.state == "UNKNOWN"
    assert "vanished" in task.state_reason or "no longer exists" in task.state_reason
    assert "retry it if it is safe" in task.state_reason


def test_a_crash_between_create_and_recording_the_uid_leaves_one_job(
    kube, kube_connection, world, inline_jobs, monkeypatch
):
    task = submit(world, start=False)  # admitted; the pass that would start it dies with its worker
    task.refresh_from_db()
    attempt = task.attempts.get()
    assert task.state == "SUBMITTING" and attempt.external_ref == ""
    # The crashed worker had sent the create: the Job exists, but its UID was never recorded.
    first = get_backend(kube_connection).ensure_started(attempt_ref(attempt))
    assert Attempt.objects.get(pk=attempt.pk).external_ref == ""
    # The next pass starts the attempt again.
    reconcile_pass()
    attempt.refresh_from_db()
    task.refresh_from_db()
    assert task.state == "STARTING"
    assert attempt.external_ref == first.ref
    assert task.events.filter(type="state", message__startswith="adopted").exists()
    assert list(kube.jobs()) == [attempt.external_name]
    assert len(kube.call(lambda: kube.api.pods_of("tasks", attempt.external_name))) == 1
    kube.run(attempt.external_name)
    kube.finish(attempt.external_name, 0)
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED"


def test_a_foreign_job_with_the_same_name_is_not_adopted(kube, kube_connection, world, inline_jobs, monkeypatch):
    task = submit(world, start=False)
    attempt = task.attempts.get()
    foreign = {
        "metadata": {"name": attempt.external_name, "labels": {"app": "someone-else"}},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "x", "image": "busybox"}]}},
        },
    }
    kube.put(JOBS, "tasks", foreign)
    reconcile_pass()
    task.refresh_from_db()
    assert task.state == "FAILED"
    assert "already exists in namespace tasks but was not created by this CloudPivot installation" in task.state_reason
    assert kube.jobs()[attempt.external_name]["metadata"]["labels"] == {"app": "someone-else"}


def test_a_start_without_permission_fails_with_words(kube, kube_connection, world, inline_jobs):
    kube.configure(permissions={("list", "batch", "jobs", ""), ("list", "", "pods", "")})
    task = submit(world)
    task.refresh_from_db()
    assert task.state == "FAILED"
    assert "may not do this (creating Job" in task.state_reason and "403 Forbidden" in task.state_reason
    assert kube.jobs() == {}


def test_a_task_without_an_image_is_refused_at_submission(kube, kube_connection, world):
    from cloudpivot.exceptions import InvalidSpec

    with pytest.raises(InvalidSpec) as error:
        task_submit(user=world.bob, document={"cloud": "k3s-lab", "command": ["true"]})
    assert error.value.errors[0]["field"] == "image"
