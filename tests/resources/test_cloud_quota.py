"""The cloud's own quota, re-checked: CloudPivot's quota lets a create through, Nova's refuses it.

A project of its own in the dev OpenStack (instance quota 0, a user with the member role, a public
image) stands for a tenant whose cloud allowance is used up; the refusal reaches the user as
"quota exceeded: instances 1/0 left", on the Operation and in the API.
"""

from __future__ import annotations

import pytest

from clusters.models import CloudConnection
from resources.models import Instance, Operation

pytestmark = pytest.mark.e2e


def test_a_create_the_clouds_own_quota_refuses_fails_with_the_resource_asked_and_left(os_instances, full_tenant, api):
    connection = CloudConnection.objects.create(
        cloud_id="os-full",
        backend="openstack",
        credentials_ref=full_tenant.clouds_yaml,
        options={"cloud": "full", "networks": "none"},
    )
    connection.projects.add(os_instances.world.alpha)
    body = {"name": "one-too-many", "cloud": "os-full", "flavor": "cp.tiny", "image": full_tenant.image}
    response = api("bob").post("/api/v1/instances", body, format="json")
    assert response.status_code == 202, response.json()  # CloudPivot's own quota has room
    operation = api("bob").get(f"/api/v1/operations/{response.json()['id']}").json()
    assert operation["state"] == "failed", operation
    assert operation["error_kind"] == "quota_exceeded"
    assert operation["error_message"].startswith("quota exceeded: instances 1/0 left"), operation
    assert Operation.objects.get(pk=response.json()["id"]).error_kind == "quota_exceeded"
    instance = Instance.objects.get(pk=response.json()["instance"])
    assert instance.status == "Failed" and "quota exceeded: instances 1/0 left" in instance.status_reason
