"""Instance and snapshot quotas: what a project holds and the first limit a request would break.

Checked under the connection and project row locks (services.requests), before any cloud is asked to make
anything; the cloud's own quota errors are mapped to the same `quota_exceeded` code afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, Sum

from cloudpivot.accounts.models import Project
from cloudpivot.accounts.quotas import quota_scope, quotas_for, shared_usage
from cloudpivot.exceptions import QuotaExceeded
from resources.choices import InstanceStatus, SnapshotStatus
from resources.models import Instance, KeptVolume, Snapshot


@dataclass
class InstanceFootprint:
    instances: int = 0
    vcpus: int = 0
    memory_mb: int = 0
    volume_gb: int = 0


# (quota field, footprint field, words, request field)
LIMITS = [
    ("max_instances", "instances", "instances", ""),
    ("max_vcpu", "vcpus", "vCPU", "flavor"),
    ("max_memory_mb", "memory_mb", "MB memory", "flavor"),
    ("max_volume_gb", "volume_gb", "volume GB", "flavor"),
]


def holding_instances(*, project_id: int, connection_id: int | None):
    """Instances that hold quota: all but deleted ones and failed creates that never got a server."""
    rows = Instance.objects.filter(project_id=project_id).exclude(status=InstanceStatus.DELETED)
    rows = rows.exclude(Q(status=InstanceStatus.FAILED) & Q(server_id=""))
    if connection_id is not None:
        rows = rows.filter(connection_id=connection_id)
    return rows


def kept_volumes_holding(*, project_id: int, connection_id: int | None):
    """Disks deleted instances kept: each holds its GB of max_volume_gb until a reclaim sees it gone."""
    rows = KeptVolume.objects.filter(project_id=project_id, reclaimed_at__isnull=True)
    return rows if connection_id is None else rows.filter(connection_id=connection_id)


def instance_usage(*, project_id: int, connection_id: int | None) -> InstanceFootprint:
    totals = holding_instances(project_id=project_id, connection_id=connection_id).aggregate(
        vcpus=Sum("vcpus"), memory_mb=Sum("memory_mb"), volume_gb=Sum("disk_gb"), volumes_gb=Sum("volumes_gb")
    )
    kept = kept_volumes_holding(project_id=project_id, connection_id=connection_id).aggregate(gb=Sum("size_gb"))
    return InstanceFootprint(
        instances=holding_instances(project_id=project_id, connection_id=connection_id).count(),
        vcpus=totals["vcpus"] or 0,
        memory_mb=totals["memory_mb"] or 0,
        volume_gb=(totals["volume_gb"] or 0) + (totals["volumes_gb"] or 0) + (kept["gb"] or 0),
    )


def check_instance_fits(*, project: Project, connection_id: int, asked: InstanceFootprint) -> None:
    """Raise QuotaExceeded naming the resource, the amount asked and what is left. Call under the row locks."""
    for quota in quotas_for(project_id=project.pk, connection_id=connection_id):
        used = instance_usage(project_id=project.pk, connection_id=quota.connection_id)
        # vCPU and memory limits hold tasks and instances together: add what the project's tasks hold.
        tasks = shared_usage(project_id=project.pk, connection_id=quota.connection_id, besides="instances")
        used.vcpus, used.memory_mb = used.vcpus + tasks.vcpu, used.memory_mb + tasks.memory_mb
        for limit_field, amount_field, words, field in LIMITS:
            limit, want = getattr(quota, limit_field), getattr(asked, amount_field)
            if limit is None or want <= 0:
                continue
            left = max(int(limit) - getattr(used, amount_field), 0)
            left = int(left) if left == int(left) else left  # tasks may hold half a vCPU
            if want > left:
                message = (
                    f"quota exceeded: {words} {want}/{left} left "
                    f"(project {project.slug}'s quota {quota_scope(quota)} allows {int(limit)})"
                )
                raise QuotaExceeded(
                    message,
                    errors=[{"field": field, "message": message}],
                    extra={"resource": amount_field, "asked": want, "left": left, "limit": int(limit)},
                )


def live_snapshots(*, project_id: int, connection_id: int | None):
    rows = Snapshot.objects.filter(
        project_id=project_id, status__in=[SnapshotStatus.CREATING, SnapshotStatus.AVAILABLE]
    )
    return rows if connection_id is None else rows.filter(connection_id=connection_id)


def check_snapshot_allowed(*, project: Project, connection_id: int) -> None:
    """A snapshot quota of 0 refuses; otherwise the oldest snapshots are pruned after a new one (see pruning)."""
    for quota in quotas_for(project_id=project.pk, connection_id=connection_id):
        for limit_field, words in (("max_snapshots", "snapshots"), ("max_snapshot_gb", "snapshot GB")):
            if getattr(quota, limit_field) == 0:
                message = f"quota exceeded: {words} 1/0 left (project {project.slug}'s quota {quota_scope(quota)} is 0)"
                raise QuotaExceeded(message, errors=[{"field": "action", "message": message}])
