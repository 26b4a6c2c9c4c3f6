"""The cloud's own quota, re-checked: CloudPivot's quota lets a create through, Nova's refuses it.

A project of its own in the dev OpenStack (instance quota 0, a user with the member role, a public
image) stands for a tenant whose cloud allowance is used up; the refusal reaches the user as
"quota exceeded: instances 1/0 left", on the Operation and in the API.
"""

from __future__ import annotations

import secrets
from types import SimpleNamespace

import pytest
import yaml

from clusters.models import CloudConnection
from resources.models import Instance, Operation
from tests.plugins.openstack import INSTALLATION

pytestmark = pytest.mark.e2e


@pytest.fixture
def full_tenant(openstack_cloud, tmp_path):
    conn = openstack_cloud.conn
    name = f"cpq-{INSTALLATION}-{secrets.token_hex(3)}"
    password = secrets.token_urlsafe(16)
    project = conn.identity.create_project(name=name, domain_id="default")
    user = conn.identity.create_user(name=name, password=password, default_project_id=project.id, domain_id="default")
    conn.identity.assign_project_role_to_user(project, user, conn.identity.find_role("member"))
    conn.set_compute_quotas(project.id, instances=0)
    image = conn.image.create_image(
        name=name, disk_format="raw", container_format="bare", visibility="public", data=b"\0" * 4096
    )
    auth = openstack_cloud.conn.config.config["auth"]
    clouds_yaml = tmp_path / "clouds.yaml"
    clouds_yaml.write_text(
        yaml.safe_dump(
            {
                "clouds": {
                    "full": {
                        "auth": {
                            "auth_url": auth["auth_url"],
                            "username": name,
                            "password": password,
                            "project_name": name,
                            "user_domain_name": "Default",
                            "project_domain_name": "Default",
                        },
                        "region_name": openstack_cloud.conn.config.region_name,
                        "identity_api_version": 3,
                    }
                }
            }
        )
    )
    yield SimpleNamespace(clouds_yaml=str(clouds_yaml), image=name)
    conn.image.delete_image(image, ignore_missing=True)
    conn.identity.delete_user(user, ignore_missing=True)
    conn.identity.delete_project(project, ignore_missing=True)


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
