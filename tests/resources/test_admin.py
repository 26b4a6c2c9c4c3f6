"""The admin: instances, snapshots and operations are shown; the owner changes only through the service."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from cloudpivot.accounts.models import AuditEntry
from resources.models import Instance, Operation
from resources.services import instance_create
from tests.builders import snapshot_row

pytestmark = pytest.mark.e2e


def test_admin_pages_show_the_rows_and_hand_an_instance_to_another_member(os_world):
    world = os_world.world
    data = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    operation, _ = instance_create(user=world.bob, data=data)
    staff = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client = Client()
    client.force_login(staff)
    for path in ("/admin/resources/instance/", "/admin/resources/snapshot/", "/admin/resources/operation/"):
        assert client.get(path).status_code == 200, path
    assert client.get(f"/admin/resources/operation/{operation.pk}/change/").status_code == 200
    url = f"/admin/resources/instance/{operation.instance_id}/change/"
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "name": "vm1",
            "new_owner": world.alice.pk,
            "operations-TOTAL_FORMS": "1",
            "operations-INITIAL_FORMS": "1",
            "operations-MIN_NUM_FORMS": "0",
            "operations-MAX_NUM_FORMS": "1000",
            "operations-0-id": str(operation.pk),
            "operations-0-instance": str(operation.instance_id),
        },
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Instance.objects.get(pk=operation.instance_id).owner == world.alice
    assert AuditEntry.objects.filter(action="resources:instance-owner-change", actor=staff).exists()
    assert client.post(f"/admin/resources/operation/{operation.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Operation.objects.filter(pk=operation.pk).exists()


def test_the_admin_deletes_no_instance_or_snapshot_and_the_log_protects_its_instance(os_world):
    """A row delete would leave the server running and wipe its Operation log: deletion is the delete action."""
    from django.db.models import ProtectedError

    from resources.models import Snapshot

    world = os_world.world
    data = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    operation, _ = instance_create(user=world.bob, data=data)
    snapshot = snapshot_row(connection=os_world.connection, project=world.alpha, owner=world.bob)
    staff = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client = Client()
    client.force_login(staff)
    for model, pk in (("instance", operation.instance_id), ("snapshot", snapshot.pk)):
        change = client.get(f"/admin/resources/{model}/{pk}/change/")
        assert change.status_code == 200
        assert f"/admin/resources/{model}/{pk}/delete/" not in change.content.decode()
        assert "delete_selected" not in client.get(f"/admin/resources/{model}/").content.decode()
        assert client.post(f"/admin/resources/{model}/{pk}/delete/", {"post": "yes"}).status_code == 403
    assert Instance.objects.filter(pk=operation.instance_id).exists() and Snapshot.objects.filter(pk=snapshot.pk)
    with pytest.raises(ProtectedError):
        Instance.objects.get(pk=operation.instance_id).delete()
    assert Operation.objects.filter(pk=operation.pk).exists()
