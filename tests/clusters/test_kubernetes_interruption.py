"""An execution Kubernetes ended for its own reasons (evicted, preempted) is interrupted, not failed (issue 30).

The attempt ends `interrupted`; the task follows its `on_interrupt` (requeue by default, with a cap of its own,
`interrupt_limit`), and an interruption never uses up `retry_limit`. The loopback API server plays the kubelet
and the scheduler (tests/clusters/kube_cluster.py), as in test_kubernetes_execution.py.
"""

from __future__ import annotations

import pytest
from django_q.conf import Conf

from tasks.models import Task
from tasks.services import reconcile_pass
from tasks.services.submission import task_submit
from tests import helpers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def inline_jobs(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def running(world, kube, **spec) -> Task:
    document = {"cloud": "k3s-lab", "image": "python:3.12-slim", "command": ["sleep", "600"], **spec}
    task, _ = task_submit(user=world.bob, document=document)
    reconcile_pass()
    kube.run(job_of(task))
    return helpers.drive(task, until={"RUNNING"})


def job_of(task: Task) -> str:
    task.refresh_from_db()
    return f"cp-{task.id.hex}-{task.attempts_count}"


def test_an_evicted_pod_is_interrupted_and_run_again_without_using_a_retry(kube, kube_connection, world, inline_jobs):
    task = running(world, kube)  # retry_limit 0: a failure would end it
    kube.evict(job_of(task))
    task = helpers.drive(task, until={"RETRY_WAIT", "FAILED", "UNKNOWN"})
    assert task.state == "RETRY_WAIT", task.state_reason
    assert "Evicted: the node evicted the pod" in task.state_reason
    assert "requeued in 1 s (interruption 1 of at most 3; retries are not used up)" in task.state_reason
    first = task.attempts.get(number=1)
    assert (first.state, task.failed_attempts, task.interruptions) == ("interrupted", 0, 1)
    assert task.events.filter(type="state", data__interrupted=True).exists()

    task = helpers.drive(task, until={"STARTING", "RUNNING"})
    assert task.attempts_count == 2
    assert task.events.filter(type="attempt", message__contains="run again after interruption 1").exists() or (
        "run again after interruption 1" in " ".join(task.events.values_list("message", flat=True))
    )
    kube.run(job_of(task))
    kube.finish(job_of(task), 0)
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED"})
    assert task.state == "SUCCEEDED"


def test_a_task_that_asks_to_fail_when_interrupted_fails(kube, kube_connection, world, inline_jobs):
    task = running(world, kube, on_interrupt="fail", retry_limit=3)
    kube.evict(job_of(task))
    task = helpers.drive(task, until={"RETRY_WAIT", "FAILED", "UNKNOWN"})
    assert task.state == "FAILED"
    assert "not run again: the task asks to fail when interrupted (on_interrupt: fail)" in task.state_reason
    assert (task.failed_attempts, task.interruptions, task.attempts_count) == (0, 1, 1)


def test_a_preempted_pod_is_requeued_up_to_the_tasks_interrupt_limit(kube, kube_connection, world, inline_jobs):
    task = running(world, kube, interrupt_limit=1)
    kube.preempt(job_of(task))
    task = helpers.drive(task, until={"RETRY_WAIT", "FAILED", "UNKNOWN"})
    assert task.state == "RETRY_WAIT", task.state_reason
    assert "PreemptionByScheduler: Kubernetes stopped the pod (Preempted in order to admit critical pod)" in (
        task.state_reason
    )
    task = helpers.drive(task, until={"STARTING", "RUNNING"})
    kube.run(job_of(task))
    task = helpers.drive(task, until={"RUNNING"})
    kube.preempt(job_of(task))
    task = helpers.drive(task, until={"RETRY_WAIT", "FAILED", "UNKNOWN"})
    assert task.state == "FAILED"
    assert "not run again: interrupted 2 times, over its limit of 1 (interrupt_limit)" in task.state_reason
    assert [a.state for a in task.attempts.order_by("number")] == ["interrupted", "interrupted"]


def test_the_documents_interruption_settings_are_checked(world, api):
    for field, value in [("on_interrupt", "retry"), ("interrupt_limit", 21), ("interrupt_limit", -1)]:
        response = api("bob").post(
            "/api/v1/tasks", {"cloud": "local", "command": ["true"], field: value}, format="json"
        )
        assert response.status_code == 400, (field, value)
        assert response.json()["errors"][0]["field"] == field
