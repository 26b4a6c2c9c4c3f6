"""An Instance for a server CloudPivot tagged but lost track of (the orphan report's Adopt): the one place
outside a create request that makes an Instance row."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from cloudpivot.accounts.models import Project
from clusters.models import CloudConnection
from resources.choices import InstanceStatus, PowerState
from resources.models import Instance


def instance_adopt(
    *,
    connection: CloudConnection,
    project: Project,
    owner: AbstractBaseUser,
    name: str,
    server_id: str,
    status: str,
    flavor: dict[str, Any],
    image: str,
) -> Instance:
    """The row for an adopted server as the cloud shows it; the caller marks the server as the instance's in
    the same transaction (no row stays if that fails)."""
    return Instance.objects.create(
        name=name[:63],
        project=project,
        owner=owner,
        connection=connection,
        backend=connection.backend,
        flavor=flavor.get("original_name") or "",
        vcpus=flavor.get("vcpus") or 0,
        memory_mb=flavor.get("ram") or 0,
        disk_gb=flavor.get("disk") or 0,
        image=image,
        desired_power_state=PowerState.STOPPED if status == InstanceStatus.STOPPED else PowerState.RUNNING,
        status=status,
        status_reason=f"adopted from orphan server {server_id}",
        observed_at=timezone.now(),
        server_id=server_id,
    )
