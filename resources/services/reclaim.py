"""Asking to reclaim a kept volume: checked (permissions, the grant, its state, the cloud's view of who uses it)
before the Operation exists; the job is OperationExecutor.volume_reclaim (services.run)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from cloudpivot.exceptions import Conflict, InvalidState, PermissionDenied, UnsupportedAction, cloud_error
from cloudpivot.idempotency import canonical_sha256
from clusters.selectors import connection_granted, grant_withdrawn_words
from resources.backends import get_instance_backend
from resources.backends.base import BackendError, Unsupported, VolumeView
from resources.choices import Action
from resources.models import KeptVolume, Operation
from resources.selectors import check_can_act
from resources.services.operations import operation_create
from resources.services.requests import _operation_for_key, _recheck_key, _save_operation
from resources.services.volumes import in_use_words, reclaim_in_flight


def _read(volume: KeptVolume) -> VolumeView | None:
    try:
        return get_instance_backend(volume.connection).volume(volume.ref)
    except Unsupported as exc:
        raise UnsupportedAction(exc.message) from None
    except BackendError as exc:
        raise cloud_error(exc, doing=f"reading {volume.ref}") from None


def volume_reclaim(*, user: AbstractBaseUser, volume: KeptVolume, idempotency_key: str = "") -> tuple[Operation, bool]:
    """Ask to delete a kept volume: refused (409 volume_in_use) while the cloud shows anything using it."""
    check_can_act(user=user, project=volume.project)
    if not connection_granted(connection_id=volume.connection_id, project_id=volume.project_id):
        words = grant_withdrawn_words(cloud_id=volume.connection.cloud_id, project_slug=volume.project.slug)
        raise PermissionDenied(f"{words}; no action can be taken there", code="cloud_not_granted")
    digest = canonical_sha256({"volume": str(volume.pk), "action": Action.VOLUME_RECLAIM})
    existing = _operation_for_key(user=user, key=idempotency_key, digest=digest)
    if existing:
        return existing, False
    _check_reclaimable(volume)
    view = _read(volume)
    if view is not None and view.users:
        raise Conflict(in_use_words(volume, view), code="volume_in_use", extra={"users": list(view.users)})

    def make() -> Operation:
        locked = KeptVolume.objects.select_for_update().get(pk=volume.pk)
        _recheck_key(user=user, key=idempotency_key, digest=digest)
        _check_reclaimable(locked)
        return operation_create(
            project_id=locked.project_id,
            instance_id=locked.instance_id,
            action=Action.VOLUME_RECLAIM,
            requested_by=user,
            idempotency_key=idempotency_key,
            request_sha256=digest,
            params={"volume": str(locked.pk), "ref": locked.ref},
        )

    return _save_operation(user=user, key=idempotency_key, digest=digest, make=make)


def _check_reclaimable(volume: KeptVolume) -> None:
    if volume.reclaimed_at is not None:
        raise InvalidState(f"{volume.ref} was reclaimed at {volume.reclaimed_at:%Y-%m-%d %H:%M} UTC")
    in_flight = reclaim_in_flight(volume)
    if in_flight is not None:
        raise InvalidState(f"{volume.ref} is being reclaimed by operation {in_flight.pk}; wait for it to finish")
