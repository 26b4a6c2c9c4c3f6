"""A cloud's refusal during an instance request is answered by the one table of cloudpivot.exceptions.cloud_error:
a cluster that refuses CloudPivot's credentials is a 502 for an admin, an unreachable one a 503 to retry.

The request is a snapshot on KubeVirt, whose check reads the VirtualMachine from the loopback API server
before any Operation exists.
"""

from __future__ import annotations

import socket

import pytest

from resources.choices import InstanceStatus
from resources.models import Instance, Operation
from tests.plugins.kube import kube_connection_to


def running_instance(world, endpoint: str, token_file) -> Instance:  # noqa: F811
    connection = kube_connection_to(
        endpoint, token_file, world.alpha, cloud_id="kv-lab", options={"vm_root_disk": {"size_gb": 5}}
    )
    return Instance.objects.create(
        name="vm1",
        project=world.alpha,
        owner=world.bob,
        connection=connection,
        backend="kubernetes",
        flavor="small",
        vcpus=1,
        memory_mb=1024,
        image="quay.io/containerdisks/fedora:40",
        status=InstanceStatus.RUNNING,
        server_id="cp-vm1",
    )


def snapshot(api, instance: Instance):
    return api("bob").post(f"/api/v1/instances/{instance.pk}/actions", {"action": "snapshot"}, format="json")


@pytest.mark.django_db
def test_a_cluster_refusing_the_credentials_is_a_502_in_words(api, world, kube, token_file):  # noqa: F811
    kube.serve_kubevirt()
    instance = running_instance(world, kube.url, token_file)
    kube.configure(permissions=set())
    response = snapshot(api, instance)
    assert response.status_code == 502, response.json()
    body = response.json()
    assert body["code"] == "cloud_refused" and body["message"].startswith("checking the action: ")
    assert "403" in body["message"], body
    assert not Operation.objects.exists()


@pytest.mark.django_db
def test_an_unreachable_cluster_is_a_503_to_try_again(api, world, token_file):  # noqa: F811
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    instance = running_instance(world, f"http://127.0.0.1:{port}", token_file)
    response = snapshot(api, instance)
    assert response.status_code == 503, response.json()
    assert response.json()["code"] == "cloud_unavailable"
    assert response.json()["message"].startswith("checking the action: ")
    assert not Operation.objects.exists()
