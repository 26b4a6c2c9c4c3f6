"""The retry suggestion and the phase list on the Kubernetes path: the real `kubernetes` client against the
loopback API server (tests/clusters/kube_fixture.py); the test plays the kubelet and the worker.

An OOMKilled container (its pod's container status) → the suggestion "more memory" on the API → a retry
with it → the second Job asks the new amount. The pod's PodScheduled condition is the attempt's
"scheduled" phase.
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


def container_memory(job: dict) -> str:
    return job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]


def test_an_oom_killed_pod_suggests_more_memory_and_the_retry_asks_for_it(
    kube, kube_connection, world, api, inline_jobs
):
    document = {"cloud": "k3s-lab", "image": "python:3.12-slim", "command": ["python3", "-c", "x = ' ' * 10**9"]}
    task, _ = task_submit(user=world.bob, document=document | {"resources": {"memory_mb": 64}})
    reconcile_pass()
    first = f"cp-{task.id.hex}-1"
    assert container_memory(kube.jobs()[first]) == "64Mi"
    kube.schedule(first)
    reconcile_pass()
    attempt = task.attempts.get()
    assert attempt.booted_at is not None, "PodScheduled is the attempt's scheduled phase"
    kube.run(first)
    task = helpers.drive(task, until={"RUNNING"})
    kube.finish(first, 137, "OOMKilled")
    task = helpers.drive(task, until={"FAILED", "SUCCEEDED", "UNKNOWN"})
    assert task.state == "FAILED", task.state_reason

    client = api("bob")
    attempts = client.get(f"/api/v1/tasks/{task.pk}/attempts").json()
    phases = [p["phase"] for p in attempts["attempts"][0]["phases"]]
    assert phases == ["queued", "admitted", "cloud_created", "booted", "program_started", "finished"]
    suggestion = attempts["suggestion"]
    assert suggestion["failure_class"] == "oom_killed"
    assert (suggestion["field"], suggestion["current"], suggestion["suggested"]) == ("resources.memory_mb", 64, 128)

    answer = client.post(
        f"/api/v1/tasks/{task.pk}/retry", {"changes": {suggestion["field"]: suggestion["suggested"]}}, format="json"
    )
    assert answer.status_code == 202, answer.content
    reconcile_pass()
    second = f"cp-{task.id.hex}-2"
    assert container_memory(kube.jobs()[second]) == "128Mi"
    task = Task.objects.get(pk=task.pk)
    assert task.state == "STARTING"
    compare = client.get(f"/api/v1/tasks/{task.pk}/attempts/compare").json()
    assert compare["spec_differences"] == [{"field": "resources.memory_mb", "a": 64, "b": 128}]
    assert compare["a"]["failure_class"] == "oom_killed"
