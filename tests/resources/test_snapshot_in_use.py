"""A snapshot an open restore uses is neither deleted nor pruned, and a restore never starts from a
snapshot a delete has claimed."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from cloudpivot.accounts.models import Quota
from resources.models import Instance, Operation, Snapshot
from resources.services import requests as request_service
from resources.services.snapshots import snapshots_prune_expired, snapshots_prune_over_quota
from tests.builders import snapshot_row

pytestmark = pytest.mark.e2e


def snapshot(os_world, name, **extra):
    world = os_world.world
    return snapshot_row(connection=os_world.connection, project=world.alpha, owner=world.bob, name=name, **extra)


def restore_as_new(api, snap):
    return api("bob").post(f"/api/v1/snapshots/{snap.pk}/restore", {"name": "copy", "flavor": "cp.tiny"}, format="json")


def test_a_snapshot_being_restored_is_not_deleted(os_world, api):
    snap = snapshot(os_world, "in-use")  # no image: nothing in the cloud to delete
    restoring = restore_as_new(api, snap)
    assert restoring.status_code == 202, restoring.json()
    response = api("bob").delete(f"/api/v1/snapshots/{snap.pk}")
    assert response.status_code == 409, response.json()
    assert response.json()["message"] == (
        f"snapshot in-use is being restored by operation {restoring.json()['id']} (create); "
        "delete it once that operation has finished"
    )
    assert Snapshot.objects.get(pk=snap.pk).status == "available"
    Operation.objects.filter(pk=restoring.json()["id"]).update(state="succeeded")
    assert api("bob").delete(f"/api/v1/snapshots/{snap.pk}").status_code == 202


def test_prunes_skip_a_snapshot_being_restored(os_world, api):
    world = os_world.world
    old, newer = snapshot(os_world, "old"), snapshot(os_world, "newer")
    Snapshot.objects.filter(pk=old.pk).update(created_at=timezone.now() - dt.timedelta(days=9))
    Snapshot.objects.filter(pk=newer.pk).update(created_at=timezone.now() - dt.timedelta(days=8))
    assert restore_as_new(api, old).status_code == 202
    Quota.objects.create(project=world.alpha, max_snapshots=1, snapshot_retention_days=7)

    assert snapshots_prune_over_quota(project=world.alpha, connection=os_world.connection, keep=newer) == []
    assert snapshots_prune_expired() == 1  # newer only

    assert Snapshot.objects.get(pk=old.pk).status == "available"
    assert Snapshot.objects.get(pk=newer.pk).status == "deleted"


def test_a_restore_rechecks_the_snapshot_once_locked(os_world, api, monkeypatch):
    """A delete claims the snapshot between the request's first check and its locks."""
    snap = snapshot(os_world, "claimed")
    real_lock = request_service._lock

    def lock_after_a_delete(connection_id: int, project_id: int) -> None:
        Snapshot.objects.filter(pk=snap.pk).update(status="deleting")
        real_lock(connection_id, project_id)

    monkeypatch.setattr(request_service, "_lock", lock_after_a_delete)
    response = restore_as_new(api, snap)
    assert response.status_code == 409, response.json()
    assert response.json()["message"] == "snapshot claimed is deleting; only an available one restores"
    assert not Instance.objects.exists()
