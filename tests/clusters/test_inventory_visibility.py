"""Readers see only their projects' pods in a cloud's inventory and current figures; node series are
for admins. Two projects share the `k3s-lab` connection; its pods carry CloudPivot's labels."""

from __future__ import annotations

import pytest
from django.conf import settings

from clusters.backends.kubernetes.labels import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, label_value
from tasks.services.submission import task_submit
from tests.builders import admit
from tests.clusters.kube_api import PODS


def pod_of(kube, task) -> str:
    """A pod as the Job of the task's first attempt would have it."""
    attempt = admit(task)
    name = f"{attempt.external_name}-pod"
    labels = {
        LABEL_INSTALLATION: label_value(settings.INSTALLATION_ID),
        LABEL_TASK: label_value(str(task.pk)),
        LABEL_ATTEMPT: attempt.external_name,
    }
    kube.put(PODS, "tasks", {"metadata": {"name": name, "namespace": "tasks", "labels": labels}})
    return name


@pytest.fixture
def two_projects(kube, kube_connection, world):
    kube_connection.projects.add(world.beta)
    document = {"cloud": "k3s-lab", "image": "busybox", "command": ["true"]}
    alphas = pod_of(kube, task_submit(user=world.bob, document=document)[0])
    betas = pod_of(kube, task_submit(user=world.charlie, document=document)[0])
    return alphas, betas


def names(answer) -> set[str]:
    return {item["name"] for item in answer.json()["items"]}


def test_readers_see_only_their_projects_pods(api, two_projects, world):
    alphas, betas = two_projects
    for user in ("alice", "bob", "rita"):
        answer = api(user).get("/api/v1/clouds/k3s-lab/resources/pods")
        assert answer.status_code == 200, answer.content
        assert names(answer) == {alphas} and answer.json()["count"] == 1
    assert names(api("charlie").get("/api/v1/clouds/k3s-lab/resources/pods")) == {betas}
    world.rita.is_staff = True
    world.rita.save()
    assert names(api("rita").get("/api/v1/clouds/k3s-lab/resources/pods")) == {alphas, betas}


def test_current_figures_hold_only_the_readers_pods(api, kube, two_projects, world):
    alphas, betas = two_projects
    usage = {"cpu": "100m", "memory": "64Mi"}
    kube.configure(metrics_served=True, pod_metrics={alphas: usage, betas: usage})
    figures = api("rita").get("/api/v1/clouds/k3s-lab/metrics").json()
    assert {pod["name"] for pod in figures["pods"]} == {alphas}
    figures = api("charlie").get("/api/v1/clouds/k3s-lab/metrics").json()
    assert {pod["name"] for pod in figures["pods"]} == {betas}


def test_node_series_are_for_admins(api, kube_connection, world):
    path = "/api/v1/clouds/k3s-lab/metrics?metric=cpu_used&subject_kind=node&subject_key=node-1"
    answer = api("bob").get(path)
    assert answer.status_code == 403 and answer.json()["code"] == "admins_only"
    world.alice.is_staff = True
    world.alice.save()
    assert api("alice").get(path).status_code == 200


def test_the_cloud_page_charts_nodes_for_admins_only(pages, world):
    import datetime as dt

    from django.utils import timezone

    from clusters.models import MetricSample

    start = timezone.now() - dt.timedelta(minutes=5)
    MetricSample.objects.bulk_create(
        MetricSample(
            connection=world.local,
            subject_kind="node",
            subject_key="node-1",
            metric="cpu_used_cores",
            value=value,
            timestamp=start + dt.timedelta(minutes=i),
        )
        for i, value in enumerate([0.5, 1.5, 1.0])
    )
    assert "CPU in use on node-1" not in pages("rita").get("/clouds/local/").content.decode()
    world.rita.is_staff = True
    world.rita.save()
    assert "CPU in use on node-1" in pages("rita").get("/clouds/local/").content.decode()
