"""A task that failed on the loopback kmock Kubernetes with its pod kept for debugging (the test plays the
kubelet): what the debug-hold tests of the API, the CLI and the task page start from."""

from __future__ import annotations

from tasks.models import Task
from tasks.services import reconcile_pass
from tests import helpers
from tests.clusters.kube_cluster import container_status, now_text


def submit(api, user: str = "bob", **spec) -> Task:
    """A k3s-lab task that fails (`boom()`), submitted through the API by `user`."""
    document = {"cloud": "k3s-lab", "image": "python:3.12-slim", "command": ["python3", "-c", "boom()"], **spec}
    response = api(user).post("/api/v1/tasks", document, format="json")
    assert response.status_code == 201, response.json()
    return Task.objects.get(pk=response.json()["id"])


def job_name(task: Task, number: int = 1) -> str:
    """The Job name of the task's attempt `number`."""
    return f"cp-{task.id.hex}-{number}"


def fail_with_debug_container_up(kube, name: str, exit_code: int = 3) -> None:
    """The kubelet's view after the program failed in a pod with a hold: `main` ended, `debug` still runs."""
    kube.set_pod_status(
        name,
        {
            "phase": "Running",
            "startTime": now_text(),
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
            "containerStatuses": [
                container_status(terminated=(exit_code, "Error")),
                {**container_status(running=True), "name": "debug"},
            ],
        },
    )


def failed_and_held(kube, api, **spec) -> tuple[Task, str]:
    """A task with a 20-minute hold that ran and failed, its pod kept: the task and its Job's name."""
    task = submit(api, debug_hold_minutes=20, **spec)
    reconcile_pass()
    name = job_name(task)
    kube.run(name)
    helpers.drive(task, until={"RUNNING"})
    fail_with_debug_container_up(kube, name)
    task = helpers.drive(task, until={"FAILED", "RETRY_WAIT", "SUCCEEDED", "UNKNOWN"})
    return task, name
