"""The refresh reads rows, then the cloud (slowly), then writes: rows changed meanwhile are not overwritten."""

from __future__ import annotations

import uuid

import pytest
from openstack.compute.v2.server import Server

from cloudpivot.accounts.models import AuditEntry
from resources.backends import get_instance_backend
from resources.backends.openstack import GONE, _observed
from resources.models import Instance, Operation
from resources.services.refresh import _observe
from tests.builders import instance_row

pytestmark = pytest.mark.e2e


def gone_instance(os_world):
    """An instance whose server id the real cloud does not know (so the refresh would call it Unknown)."""
    world = os_world.world
    return instance_row(
        connection=os_world.connection,
        project=world.alpha,
        owner=world.bob,
        image="img",
        status="Running",
        server_id=str(uuid.uuid4()),
    )


def test_a_delete_finished_during_the_cloud_read_stays_deleted(os_world):
    instance = gone_instance(os_world)
    stale = Instance.objects.get(pk=instance.pk)  # what the refresh read before its list call
    Instance.objects.filter(pk=instance.pk).update(status="Deleted", status_reason="deleted")  # the delete ends
    backend = get_instance_backend(os_world.connection)

    assert _observe(stale, None, backend) == 0

    assert Instance.objects.get(pk=instance.pk).status == "Deleted"
    assert not AuditEntry.objects.filter(action="resources:instance-unknown").exists()
    # the same observation on a row that did not change is written
    fresh = gone_instance(os_world)
    assert _observe(Instance.objects.get(pk=fresh.pk), None, backend) == 1
    assert Instance.objects.get(pk=fresh.pk).status == "Unknown"


def test_a_server_the_cloud_shows_deleted_is_gone_not_deleted_by_us(os_world):
    """Nova shows a server DELETED for a moment before it answers 404: the backend reads both as no server, so the
    refresh concludes Unknown (with the evidence), never the portal's Deleted, which only a delete through
    CloudPivot writes."""
    instance = gone_instance(os_world)
    for status in GONE:
        assert _observed(Server(id=instance.server_id, status=status)) is None
    view = _observed(Server(id=instance.server_id, status="DELETED"))

    assert _observe(Instance.objects.get(pk=instance.pk), view, get_instance_backend(os_world.connection)) == 1

    row = Instance.objects.get(pk=instance.pk)
    assert row.status == "Unknown" and row.status_reason.startswith(f"server {instance.server_id} not found")
    assert AuditEntry.objects.filter(action="resources:instance-unknown", object_ref=str(instance.pk)).exists()


def test_an_action_started_during_the_cloud_read_is_left_to_its_operation(os_world):
    instance = gone_instance(os_world)
    stale = Instance.objects.get(pk=instance.pk)
    operation = Operation.objects.create(project=instance.project, instance=instance, action="stop", state="pending")
    Instance.objects.filter(pk=instance.pk).update(operation=operation)

    assert _observe(stale, None, get_instance_backend(os_world.connection)) == 0

    assert Instance.objects.get(pk=instance.pk).status == "Running"
