"""Kept volumes: recorded when a delete keeps them, reclaimed (deleted in the cloud) only when nothing uses them.

A delete with `volumes: keep` leaves the instance's disks in the cloud (services.run checks they survived);
each becomes a KeptVolume of the instance's project, holding its GB of `max_volume_gb` until reclaimed. A
reclaim is an Operation like any write: the request reads the volume from the cloud and refuses (409
`volume_in_use`) while a server or VM still uses it; the job (services.run, OperationExecutor.volume_reclaim) reads it
again right before the delete (a VM may have started using it since) and succeeds only once the cloud shows it
gone.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from cloudpivot.accounts.audit import audit_system
from resources.backends.base import VolumeView
from resources.choices import OPEN_OPERATION_STATES, Action
from resources.models import Instance, KeptVolume, Operation


def volumes_keep_record(*, instance: Instance, backend: Any, refs: list[str]) -> list[dict[str, Any]]:
    """After a delete that kept `refs` (checked to have survived): one KeptVolume each, with its size as the
    cloud shows it now. A row already there (a retried job) is reused."""
    kept = []
    for ref in refs:
        view = backend.volume(ref)
        size = view.size_gb if view is not None else 0
        row, _ = KeptVolume.objects.get_or_create(
            connection_id=instance.connection_id,
            ref=ref,
            reclaimed_at=None,
            defaults={"project_id": instance.project_id, "instance": instance, "size_gb": size},
        )
        kept.append({"id": str(row.pk), "ref": ref, "size_gb": row.size_gb})
    return kept


def volumes_purge(runner: Any, refs: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """A delete with `volumes: purge`, once the server is gone: delete each of its volumes and see it gone.
    One something else uses now (another VM mounted it) is not deleted: it is recorded as kept instead."""
    backend, purged, in_use = runner.backend, [], []
    for ref in refs:
        view = backend.volume(ref)
        if view is not None and view.users:
            in_use.append(ref)
            continue
        if view is not None:
            backend.delete_volume(ref)
            runner.wait(lambda ref=ref: True if backend.volume(ref) is None else None, f"{ref} gone")
        purged.append(ref)
    return purged, volumes_keep_record(instance=runner.instance, backend=backend, refs=in_use)


def reclaim_in_flight(volume: KeptVolume) -> Operation | None:
    return Operation.objects.filter(
        action=Action.VOLUME_RECLAIM, params__volume=str(volume.pk), state__in=OPEN_OPERATION_STATES
    ).first()


def in_use_words(volume: KeptVolume, view: VolumeView) -> str:
    return (
        f"{view.ref} is still used by {', '.join(view.users)}: a volume is reclaimed only once nothing "
        "writes to it; delete or change those first"
    )


def volume_reclaimed(volume: KeptVolume, operation: Operation, *, deleted: bool) -> dict[str, Any]:
    """The reclaim job saw the volume gone: its GB are free. Audited with who asked."""
    KeptVolume.objects.filter(pk=volume.pk).update(reclaimed_at=timezone.now())
    audit_system(
        action="resources:volume-reclaimed",
        object_ref=str(volume.pk),
        details={"ref": volume.ref, "size_gb": volume.size_gb, "operation": str(operation.pk)},
        actor=operation.requested_by,
        via="job",
    )
    words = "deleted" if deleted else "already gone from the cloud"
    return {"volume": str(volume.pk), "ref": volume.ref, "size_gb": volume.size_gb, "reclaimed": words}
