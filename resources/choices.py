"""The words of the resources app: instance statuses, power states, actions and operation states."""

from __future__ import annotations

from django.db import models


class InstanceStatus(models.TextChoices):
    """What CloudPivot last observed (DESIGN §7); Deleted is the portal's end state, the row stays as history."""

    PENDING = "Pending"
    STARTING = "Starting"
    RUNNING = "Running"
    PAUSED = "Paused"
    SUSPENDED = "Suspended"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    FAILED = "Failed"
    BLOCKED = "Blocked"
    UNKNOWN = "Unknown"
    DELETED = "Deleted"


class PowerState(models.TextChoices):
    RUNNING = "running"
    STOPPED = "stopped"


class Action(models.TextChoices):
    CREATE = "create"
    START = "start"
    STOP = "stop"
    REBOOT = "reboot"
    PAUSE = "pause"
    UNPAUSE = "unpause"
    SUSPEND = "suspend"
    RESUME = "resume"
    SNAPSHOT = "snapshot"
    RESTORE = "restore"
    RESIZE = "resize"
    DELETE = "delete"
    SNAPSHOT_DELETE = "snapshot_delete"


class OperationState(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class SnapshotStatus(models.TextChoices):
    CREATING = "creating"
    AVAILABLE = "available"
    FAILED = "failed"
    DELETING = "deleting"
    DELETED = "deleted"


OPEN_OPERATION_STATES = (OperationState.PENDING, OperationState.RUNNING)
# An instance in these statuses holds quota (a failed create that left no server does not: see services).
NOT_HOLDING = (InstanceStatus.DELETED,)
