"""Writes of the resources app (requests, the operation runner, refresh, snapshots, ownership)."""

from resources.services.ownership import instance_owner_change
from resources.services.refresh import instances_refresh
from resources.services.requests import instance_action, instance_create, snapshot_delete
from resources.services.run import operation_run

__all__ = [
    "instance_action",
    "instance_create",
    "instance_owner_change",
    "instances_refresh",
    "operation_run",
    "snapshot_delete",
]
