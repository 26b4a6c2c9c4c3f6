"""What an instance's page says about when and why: status_changed_at moves, a stuck snapshot names the image."""

from __future__ import annotations

import datetime as dt

import pytest

from resources.models import Instance

pytestmark = [pytest.mark.e2e]


def create(api):
    document = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    response = api("bob").post("/api/v1/instances", document, format="json")
    assert response.status_code == 202, response.json()
    operation = api("bob").get(f"/api/v1/operations/{response.json()['id']}").json()
    assert operation["state"] == "succeeded", operation
    return operation["instance"]


def operation_of(api, instance_id, **payload):
    response = api("bob").post(f"/api/v1/instances/{instance_id}/actions", payload, format="json")
    assert response.status_code == 202, response.json()
    return api("bob").get(f"/api/v1/operations/{response.json()['id']}").json()


def changed_at(api, instance_id) -> dt.datetime:
    vm = api("bob").get(f"/api/v1/instances/{instance_id}").json()
    return dt.datetime.fromisoformat(vm["status_changed_at"].replace("Z", "+00:00"))


def test_status_changed_at_moves_when_the_status_changes(os_instances, api):
    instance_id = create(api)
    row = Instance.objects.get(pk=instance_id)
    running_since = changed_at(api, instance_id)
    assert row.status == "Running" and running_since > row.created_at  # Pending → Running moved it
    assert operation_of(api, instance_id, action="stop")["state"] == "succeeded"
    stopped_since = changed_at(api, instance_id)
    assert stopped_since > running_since


def test_a_snapshot_that_never_completes_reports_the_images_status_not_the_servers(os_instances, api, settings):
    instance_id = create(api)
    # no snapshot_filler: the image stays queued; long enough for the server's own snapshot step to clear first
    settings.INSTANCE_OPERATION_DEADLINE_SECONDS = 20
    operation = operation_of(api, instance_id, action="snapshot", name="never-done")
    assert operation["state"] == "failed", operation
    message = operation["error_message"]
    assert "last seen image status queued" in message, message
    assert "ACTIVE" not in message
