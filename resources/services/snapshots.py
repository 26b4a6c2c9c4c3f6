"""Snapshot limits: count, GB and age, enforced by pruning the oldest first, each prune audited."""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cloudpivot.accounts.audit import audit_system
from cloudpivot.accounts.models import Project, Quota
from cloudpivot.accounts.quotas import quota_scope, quotas_for
from clusters.models import CloudConnection
from resources.backends import get_instance_backend
from resources.backends.base import BackendError
from resources.choices import OPEN_OPERATION_STATES, Action, SnapshotStatus
from resources.models import Operation, Snapshot
from resources.quotas import live_snapshots

GB = 1024**3


def snapshots_prune_over_quota(*, project: Project, connection: CloudConnection, keep: Snapshot | None) -> list[str]:
    """After a new snapshot: delete the oldest available ones until every count/GB limit holds again."""
    pruned: list[str] = []
    for quota in quotas_for(project_id=project.pk, connection_id=connection.pk):
        if quota.max_snapshots is None and quota.max_snapshot_gb is None:
            continue
        while True:
            rows = live_snapshots(project_id=project.pk, connection_id=quota.connection_id)
            count = rows.count()
            size = sum(s.size_bytes or 0 for s in rows)
            over_count = quota.max_snapshots is not None and count > quota.max_snapshots
            over_size = quota.max_snapshot_gb is not None and size > quota.max_snapshot_gb * GB
            if not (over_count or over_size):
                break
            oldest = _unused(rows.filter(status=SnapshotStatus.AVAILABLE).exclude(pk=keep.pk if keep else None))
            victim = oldest.order_by("created_at", "id").first()
            if victim is None:
                break
            why = (
                f"{count} snapshots over the limit of {quota.max_snapshots}"
                if over_count
                else f"{size} bytes over the limit of {quota.max_snapshot_gb} GB"
            )
            if not _prune(victim, why=f"{why} ({_scope(quota)})"):
                break  # claimed by a restore or a delete meanwhile: the next schedule looks again
            pruned.append(str(victim.pk))
    return pruned


def snapshots_prune_expired() -> int:
    """Snapshots older than their project's retention (days) are pruned."""
    count = 0
    now = timezone.now()
    quotas = Quota.objects.filter(snapshot_retention_days__isnull=False).select_related("project", "connection")
    for quota in quotas:
        cutoff = now - dt.timedelta(days=quota.snapshot_retention_days)
        rows = Snapshot.objects.filter(
            project=quota.project, status=SnapshotStatus.AVAILABLE, created_at__lt=cutoff
        ).filter(Q(connection=quota.connection) if quota.connection_id else Q())
        for snapshot in _unused(rows).select_related("connection"):
            count += _prune(snapshot, why=f"older than {quota.snapshot_retention_days} days ({_scope(quota)})")
    return count


def _scope(quota: Quota) -> str:
    return f"project {quota.project.slug} {quota_scope(quota)}"


def _unused(rows):
    """Snapshots no open restore (into an instance, or as a new one) is using."""
    in_use = Operation.objects.filter(
        action__in=(Action.RESTORE, Action.CREATE), state__in=OPEN_OPERATION_STATES, snapshot__isnull=False
    )
    return rows.exclude(pk__in=in_use.values("snapshot_id"))


def _claim(snapshot: Snapshot) -> bool:
    """Under the row lock a restore's request also takes: still available and unused → deleting, ours."""
    with transaction.atomic():
        locked = Snapshot.objects.select_for_update().filter(pk=snapshot.pk, status=SnapshotStatus.AVAILABLE)
        if not _unused(locked).exists():
            return False
        Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.DELETING)
    return True


def _prune(snapshot: Snapshot, *, why: str) -> bool:
    if not _claim(snapshot):
        return False
    try:
        if snapshot.image_id:
            get_instance_backend(snapshot.connection).delete_image(snapshot.image_id)
        Snapshot.objects.filter(pk=snapshot.pk).update(
            status=SnapshotStatus.DELETED, deleted_at=timezone.now(), status_reason=f"pruned: {why}"
        )
        outcome = "pruned"
    except BackendError as exc:
        Snapshot.objects.filter(pk=snapshot.pk).update(
            status=SnapshotStatus.AVAILABLE, status_reason=f"prune failed: {exc.message}"
        )
        outcome = f"prune failed: {exc.message}"
    audit_system(
        action="resources:snapshot-pruned",
        object_ref=str(snapshot.pk),
        details={"snapshot": snapshot.name, "image_id": snapshot.image_id, "why": why, "outcome": outcome},
    )
    return outcome == "pruned"
