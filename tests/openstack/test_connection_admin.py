"""The admin's connection form and "Test connection" against the development OpenStack, and
`manage.py connect_dev_openstack`, which registers that cloud from its own files."""

from __future__ import annotations

import stat

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from clusters.models import CloudConnection
from tests.plugins.openstack import INSTALLATION

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
ADD = "/admin/clusters/cloudconnection/add/"


@pytest.fixture
def root(world, openstack_cloud, settings) -> Client:
    settings.INSTALLATION_ID = INSTALLATION
    user = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client = Client()
    client.force_login(user)
    return client


def form(openstack_cloud, **fields) -> dict:
    return {
        "cloud_id": "os-dev",
        "backend": "openstack",
        "dispatch_enabled": "on",
        "max_active_tasks": "0",
        "credentials_ref": openstack_cloud.clouds_yaml,
        "os_cloud": openstack_cloud.cloud,
        "os_flavor": "cp.tiny",
        "os_image": "cp-runner-fake",
        "os_networks": "none",
        "options": "{}",
        "check_cloud": "on",
    } | fields


def test_a_wrong_flavor_or_image_is_refused_on_save_listing_what_the_cloud_has(root, openstack_cloud):
    response = root.post(ADD, form(openstack_cloud, os_flavor="cp.tinny", os_image="cp-runner"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "flavor 'cp.tinny': not found in this project; there are: " in errors["os_flavor"][0]
    assert "cp.tiny" in errors["os_flavor"][0] and "cp.nohost" in errors["os_flavor"][0]
    assert "cp-runner-fake" in errors["os_image"][0]
    assert not CloudConnection.objects.filter(cloud_id="os-dev").exists()


def test_test_connection_shows_each_check_and_stores_the_health_the_api_shows(root, world, openstack_cloud, api):
    response = root.post(ADD, form(openstack_cloud, projects=[world.alpha.pk]))
    assert response.status_code == 302, response.context["adminform"].form.errors
    connection = CloudConnection.objects.get(cloud_id="os-dev")
    assert connection.health_status == "unknown"
    page = root.post(f"/admin/clusters/cloudconnection/{connection.pk}/test/", follow=True)
    said = [str(m) for m in page.context["messages"]]
    for line in ("ok authentication (Keystone)", "ok flavor 'cp.tiny': exists", "ok image 'cp-runner-fake': exists"):
        assert any(m.startswith(f"os-dev: {line}") for m in said), said
    assert any(m.startswith("os-dev: OK: everything CloudPivot needs is there") for m in said), said
    assert 'id="connection-health">Health: <strong>OK</strong>' in page.content.decode()
    connection.refresh_from_db()
    assert connection.health_status == "ok" and connection.health_checked_at
    clouds = {c["cloud_id"]: c for c in api("alice").get("/api/v1/clouds").json()}
    assert clouds["os-dev"]["health_status"] == "ok"
    assert clouds["os-dev"]["health_message"].startswith("everything CloudPivot needs is there")


def test_connect_dev_openstack_registers_the_cloud_from_its_own_files(world, openstack_cloud, settings, tmp_path):
    settings.INSTALLATION_ID = INSTALLATION
    settings.CREDENTIALS_DIR = tmp_path / "credentials"
    call_command("connect_dev_openstack", "--project", "alpha")
    connection = CloudConnection.objects.get(cloud_id="os-dev")
    copied = settings.CREDENTIALS_DIR / "dev-openstack-clouds.yaml"
    assert connection.credentials_ref == str(copied.resolve())
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600
    assert connection.options["cloud"] == "cloudpivot-dev" and connection.options["flavor"] == "cp.tiny"
    assert connection.health_status == "ok"
    call_command("connect_dev_openstack", "--project", "beta")  # again: the same row, one more grant
    assert CloudConnection.objects.filter(backend="openstack").count() == 1
    assert set(connection.projects.values_list("slug", flat=True)) == {"alpha", "beta"}
