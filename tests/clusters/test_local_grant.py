"""`local` runs code on the CloudPivot host: only superusers grant or change it, and the admin says so.

Staff with every cloud-connection permission could otherwise grant `local` to their own project and run
programs as the server's user: superuser power by another door (docs/security.md).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command

from cloudpivot.accounts.models import Project
from clusters.models import CloudConnection


@pytest.fixture
def staff(client, world):
    """A staff user with every permission on cloud connections, but not a superuser."""
    user = get_user_model().objects.create_user("stan", "stan@example.org", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="clusters"))
    client.force_login(user)
    return client


def form(connection: CloudConnection, projects: list[int]) -> dict:
    return {
        "cloud_id": connection.cloud_id,
        "name": connection.name,
        "backend": connection.backend,
        "dispatch_enabled": "on",
        "max_active_tasks": "0",
        "projects": [str(pk) for pk in projects],
        "endpoint": "",
        "scope": "",
        "credentials_ref": "",
        "options": "{}",
    }


def test_local_runs_on_the_host_whatever_the_form_says(world):
    assert world.local.runs_on_host
    other = CloudConnection.objects.create(cloud_id="k", backend="kubernetes")
    assert not other.runs_on_host


def test_staff_who_are_not_superusers_cannot_grant_or_change_local(staff, world):
    gamma = Project.objects.create(slug="gamma", name="Gamma")
    url = f"/admin/clusters/cloudconnection/{world.local.pk}/change/"
    page = staff.get(url)
    assert page.status_code == 200 and b'name="projects"' not in page.content  # view only
    assert staff.post(url, form(world.local, [world.alpha.pk, world.beta.pk, gamma.pk])).status_code == 403
    assert set(world.local.projects.values_list("slug", flat=True)) == {"alpha", "beta"}
    # They can still manage other connections, but not make a new local one.
    add = staff.get("/admin/clusters/cloudconnection/add/")
    assert add.status_code == 200 and b'value="kubernetes"' in add.content and b'value="local"' not in add.content


def test_a_superuser_grants_local_and_is_told_what_it_means(client, world):
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(root)
    gamma = Project.objects.create(slug="gamma", name="Gamma")
    url = f"/admin/clusters/cloudconnection/{world.local.pk}/change/"
    page = client.get(url)
    assert "runs each task's program on the CloudPivot host itself" in page.content.decode()
    response = client.post(url, form(world.local, [world.alpha.pk, gamma.pk]))
    assert response.status_code == 302, response.content[:2000]
    assert set(world.local.projects.values_list("slug", flat=True)) == {"alpha", "gamma"}


def test_the_demo_data_grants_local_to_the_demo_project(db):
    call_command("bootstrap_demo", stdout=open("/dev/null", "w"))
    local = CloudConnection.objects.get(cloud_id="local")
    assert local.runs_on_host and list(local.projects.values_list("slug", flat=True)) == ["demo"]
