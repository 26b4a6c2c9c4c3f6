"""Egress of a container task (docs/security.md#egress): a NetworkPolicy per Job's pods, made before the Job,
owned by it and deleted with it, valid for Kubernetes 1.33 as the Job is; `open` makes none; what the connection's
policy does not allow is refused at submission. Against the loopback API server (tests/plugins/kube.py)."""

from __future__ import annotations

import copy

import kmock
import kubernetes_validate
import pytest
from django_q.conf import Conf

from clusters.backends.kubernetes import LABEL_ATTEMPT, LABEL_INSTALLATION
from clusters.models import CloudConnection
from tasks.models import Attempt
from tasks.services import reconcile_pass
from tasks.services.submission import task_submit
from tests import helpers
from tests.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
POLICIES = kmock.resource("networking.k8s.io", "v1", "networkpolicies")
KUBERNETES_RELEASE = "1.33"
DNS = {
    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}


@pytest.fixture
def inline_jobs(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def with_policy(connection: CloudConnection, policy: dict) -> None:
    options = copy.deepcopy(connection.options) | {"egress": policy}
    CloudConnection.objects.filter(pk=connection.pk).update(options=options)


def submit(world, **extra):
    document = {"cloud": "k3s-lab", "image": "python:3.12-slim", "command": ["python3", "-c", "print(1)"], **extra}
    task, _ = task_submit(user=world.bob, document=document)
    reconcile_pass()
    task.refresh_from_db()
    assert task.state == "STARTING", task.state_reason
    return task, f"cp-{task.id.hex}-1"


def validate(obj: dict) -> None:
    """Against the Kubernetes 1.33 schema, strictly (a misspelt field is refused), as the API server would."""
    stored = copy.deepcopy(obj)
    stored.pop("status", None)
    kubernetes_validate.validate(stored, KUBERNETES_RELEASE, strict=True)


def test_a_list_of_destinations_becomes_a_network_policy_owned_by_the_job(kube, kube_connection, world, inline_jobs):
    with_policy(kube_connection, {"default": "none", "allow": ["10.0.0.0/8", "192.0.2.0/24:443"]})
    task, name = submit(world, network=["10.20.0.0/16:5432", "192.0.2.7:443"])
    assert task.normalized["egress"] == ["10.20.0.0/16:5432", "192.0.2.7/32:443"]
    job = kube.jobs()[name]
    policy = kube.objects(POLICIES)[name]
    # Selects the Job's pods by the labels on its pod template; egress only; DNS, then each destination.
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector == {LABEL_ATTEMPT: name, LABEL_INSTALLATION: pod_labels[LABEL_INSTALLATION]}
    assert all(pod_labels[key] == value for key, value in selector.items())
    assert policy["spec"]["policyTypes"] == ["Egress"]
    assert policy["spec"]["egress"] == [
        DNS,
        {
            "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
            "ports": [{"protocol": "TCP", "port": 5432}, {"protocol": "UDP", "port": 5432}],
        },
        {
            "to": [{"ipBlock": {"cidr": "192.0.2.7/32"}}],
            "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "UDP", "port": 443}],
        },
    ]
    owners = policy["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("Job", name, job["metadata"]["uid"])]
    # Made before the Job: its pod never runs without it.
    creations = [
        (r.resource.plural, (r.data or {}).get("metadata", {}).get("name"))
        for r in kube.call(lambda: list(kube.api.client_requests))
        if r.method == "POST" and r.resource is not None and r.resource.plural in ("jobs", "networkpolicies")
    ]
    assert creations == [("networkpolicies", name), ("jobs", name)]
    # Both valid for Kubernetes 1.33; no Service addresses handed to the pod as variables.
    validate(job)
    validate(policy)
    assert job["spec"]["template"]["spec"]["enableServiceLinks"] is False

    # Cleanup deletes the Job and the policy with it.
    kube.schedule(name)
    kube.run(name)
    kube.finish(name, 0)
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason
    attempt = task.attempts.get()
    wait_for(
        lambda: reconcile_pass() is not None and Attempt.objects.get(pk=attempt.pk).cleanup_state == "done",
        what="cleanup",
    )
    assert name not in kube.jobs() and name not in kube.objects(POLICIES)


def test_none_is_a_policy_without_any_rule(kube, kube_connection, world, inline_jobs):
    task, name = submit(world, network="none")
    policy = kube.objects(POLICIES)[name]
    assert task.normalized["egress"] == "none"
    assert policy["spec"]["policyTypes"] == ["Egress"] and policy["spec"]["egress"] == []
    validate(policy)


def test_the_connections_default_closes_a_task_that_asks_nothing(api, kube, kube_connection, world, inline_jobs):
    with_policy(kube_connection, {"default": "none"})
    task, name = submit(world)
    assert task.normalized["egress"] == "none" and kube.objects(POLICIES)[name]["spec"]["egress"] == []
    assert api("bob").get(f"/api/v1/tasks/{task.pk}").json()["egress"] == "none"


def test_open_makes_no_policy(kube, kube_connection, world, inline_jobs):
    task, name = submit(world, network="default")
    assert task.normalized["egress"] == "open" and name in kube.jobs()
    assert kube.objects(POLICIES) == {}


def test_a_destination_the_policy_does_not_allow_is_refused(api, kube, kube_connection, world):
    with_policy(kube_connection, {"default": "none", "allow": ["10.0.0.0/8:443"]})
    document = {
        "cloud": "k3s-lab",
        "image": "busybox",
        "command": ["true"],
        "network": ["10.1.2.3:443", "10.1.2.3:22", "0.0.0.0/0"],
    }
    response = api("bob").post("/api/v1/tasks", document, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["errors"][0]
    assert error["field"] == "network"
    assert error["message"] == (
        "the egress policy of the k3s-lab cloud does not allow 10.1.2.3/32:22, 0.0.0.0/0 (it allows: 10.0.0.0/8:443)"
    )
