"""An admin removes a project's grant on a connection: its queued tasks and retries there end CANCELLED,
its running ones are stopped, queued instance actions are refused, and nothing new starts there — each
with the reason in words. Other projects on the same connection go on."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from clusters.models import CloudConnection
from resources.models import Operation
from resources.services.run import operation_run
from tasks.services import reconcile_pass
from tests.builders import finished, instance_row, report, running, submit

REASON = "project alpha may no longer use local (an administrator removed its access)"


@pytest.fixture
def superuser_client(client, world):
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    return client


def remove_alpha_in_the_admin(client, connection: CloudConnection, keep: list) -> None:
    """What a superuser does on the connection's admin page: unselect alpha under *Projects*, save."""
    data = {
        "cloud_id": connection.cloud_id,
        "name": connection.name,
        "backend": connection.backend,
        "dispatch_enabled": "on",
        "max_active_tasks": str(connection.max_active_tasks),
        "projects": [project.pk for project in keep],
        "endpoint": connection.endpoint,
        "scope": connection.scope,
        "credentials_ref": connection.credentials_ref,
        "options": json.dumps(connection.options),
    }
    response = client.post(f"/admin/clusters/cloudconnection/{connection.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert list(connection.projects.all()) == keep


def test_removing_a_grant_cancels_queued_tasks_and_retries_and_stops_running_ones(superuser_client, world, api):
    retrying = finished(world.bob, exit_code=3, retry_limit=2)
    assert retrying.state == "RETRY_WAIT"
    active, attempt = running(world.bob)
    pending = submit(world.bob)  # not admitted yet
    others = submit(world.charlie)  # project beta keeps its grant

    remove_alpha_in_the_admin(superuser_client, world.local, keep=[world.beta])

    client = api("bob")
    for task in (pending, retrying):
        body = client.get(f"/api/v1/tasks/{task.pk}").json()
        assert body["state"] == "CANCELLED", body
        assert body["state_reason"] == f"cancelled: {REASON}"
    body = client.get(f"/api/v1/tasks/{active.pk}").json()
    assert body["state"] == "CANCELLING" and REASON in body["state_reason"]
    attempt.refresh_from_db()
    assert attempt.stop_requested_at is not None  # the Runner (or host agent) is told to stop the program
    report(attempt, {"type": "exited", "data": {"exit_code": None, "signal": 15}})
    assert client.get(f"/api/v1/tasks/{active.pk}").json()["state"] == "CANCELLED"
    reconcile_pass()  # admission or retry never brings them back
    for task in (pending, retrying):
        assert client.get(f"/api/v1/tasks/{task.pk}").json()["state"] == "CANCELLED"
    assert api("charlie").get(f"/api/v1/tasks/{others.pk}").json()["state"] in ("PENDING", "SUBMITTING", "STARTING")


def test_a_task_cannot_be_retried_on_a_cloud_its_project_lost(world, api):
    task = finished(world.bob, exit_code=1)
    world.local.projects.remove(world.alpha)  # any way the grant goes (here: the shell)
    response = api("bob").post(f"/api/v1/tasks/{task.pk}/retry")
    assert response.status_code == 403
    assert response.json()["code"] == "cloud_not_granted" and REASON in response.json()["message"]


def test_clearing_every_grant_of_a_project_stops_its_tasks_too(world, api):
    pending = submit(world.bob)
    world.alpha.connections.clear()  # from the project's side
    assert api("bob").get(f"/api/v1/tasks/{pending.pk}").json()["state"] == "CANCELLED"


def test_queued_instance_actions_are_refused_and_new_ones_too(world, api):
    cloud = CloudConnection.objects.create(cloud_id="os-lab", backend="openstack")
    cloud.projects.add(world.alpha)
    instance = instance_row(connection=cloud, project=world.alpha, owner=world.bob, status="Running", server_id="s-1")
    queued = Operation.objects.create(project=world.alpha, instance=instance, action="stop", requested_by=world.bob)
    instance.operation = queued
    instance.save(update_fields=["operation"])

    cloud.projects.remove(world.alpha)
    operation_run(operation_id=str(queued.pk))  # the worker picks the queued job up

    body = api("bob").get(f"/api/v1/operations/{queued.pk}").json()
    assert body["state"] == "failed", body
    assert "refused: project alpha may no longer use os-lab" in body["error_message"]
    response = api("bob").post(f"/api/v1/instances/{instance.pk}/actions", {"action": "start"}, format="json")
    assert response.status_code == 403
    assert "project alpha may no longer use os-lab" in response.json()["message"]
