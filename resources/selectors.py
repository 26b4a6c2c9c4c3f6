"""Reads for instances, snapshots and operations: every path starts from what the user may see."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet

from cloudpivot.accounts.models import Membership, Project, Role
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.exceptions import NotFound, PermissionDenied
from clusters.ownership import SnapshotOwner
from resources.choices import SnapshotStatus
from resources.models import Instance, KeptVolume, Operation, Snapshot


def _visible(queryset: QuerySet, user: AbstractBaseUser) -> QuerySet:
    if user.is_superuser:
        return queryset
    return queryset.filter(project_id__in=Membership.objects.filter(user=user).values("project_id"))


def instances_visible_to(*, user: AbstractBaseUser) -> QuerySet[Instance]:
    return _visible(Instance.objects.select_related("project", "owner", "connection", "operation"), user)


def snapshots_visible_to(*, user: AbstractBaseUser) -> QuerySet[Snapshot]:
    return _visible(Snapshot.objects.select_related("project", "owner", "connection", "instance"), user)


def operations_visible_to(*, user: AbstractBaseUser) -> QuerySet[Operation]:
    return _visible(Operation.objects.select_related("project", "instance", "snapshot", "requested_by"), user)


def kept_volumes_visible_to(*, user: AbstractBaseUser) -> QuerySet[KeptVolume]:
    return _visible(KeptVolume.objects.select_related("project", "connection", "instance"), user)


def kept_volume_get_for_user(*, user: AbstractBaseUser, volume_id: Any) -> KeptVolume:
    return _get(kept_volumes_visible_to(user=user), volume_id, "volume")


def _get(queryset: QuerySet, pk: Any, what: str) -> Model:
    try:
        return queryset.get(pk=pk)
    except (queryset.model.DoesNotExist, ValueError, TypeError, ValidationError):
        raise NotFound(f"{what} {pk} not found") from None


def instance_get_for_user(*, user: AbstractBaseUser, instance_id: Any) -> Instance:
    return _get(instances_visible_to(user=user), instance_id, "instance")


def snapshot_get_for_user(*, user: AbstractBaseUser, snapshot_id: Any) -> Snapshot:
    return _get(snapshots_visible_to(user=user), snapshot_id, "snapshot")


def operation_get_for_user(*, user: AbstractBaseUser, operation_id: Any) -> Operation:
    return _get(operations_visible_to(user=user), operation_id, "operation")


def check_can_act(*, user: AbstractBaseUser, project: Project) -> None:
    """Submitters and admins act on the project's instances and snapshots; readers only read."""
    role = project_role(user=user, project=project)
    if not role_at_least(role, Role.SUBMITTER):
        raise PermissionDenied(f"your role in {project.slug} is {role}; instance actions need submitter or admin")


def snapshot_owners_of_image(image_id: str) -> list[SnapshotOwner]:
    """Every snapshot made as this cloud image, with its project (clusters.ownership's rule reads these)."""
    rows = Snapshot.objects.filter(image_id=image_id).values_list("pk", "name", "project_id", "project__slug", "status")
    return [
        SnapshotOwner(str(pk), name, project_id, slug, status != SnapshotStatus.DELETED)
        for pk, name, project_id, slug, status in rows
    ]
