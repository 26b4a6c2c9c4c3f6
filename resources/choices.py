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
    VOLUME_RECLAIM = "volume_reclaim"


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
_O = OperationState
# An Operation is born PENDING (asked for) or SUCCEEDED (a change the refresh observed and records as done); its
# one writer is resources.services.operations. RUNNING → RUNNING: a new worker resumes one whose lease ran out.
OPERATION_BORN = frozenset({_O.PENDING, _O.SUCCEEDED})
OPERATION_TRANSITIONS: dict[str, frozenset[str]] = {
    _O.PENDING: frozenset({_O.RUNNING}),
    _O.RUNNING: frozenset({_O.RUNNING, _O.SUCCEEDED, _O.FAILED}),
    _O.SUCCEEDED: frozenset(),
    _O.FAILED: frozenset(),
}
# An instance in these statuses holds quota (a failed create that left no server does not: see services).
NOT_HOLDING = (InstanceStatus.DELETED,)

S = InstanceStatus
# The state table: the observed statuses from which each action may be asked (Nova's own rules, narrowed).
# Reboot has two rows (state_table_key): a hard reboot also recovers a stopped, paused or failed server.
ALLOWED_FROM: dict[str, frozenset[str]] = {
    Action.START: frozenset({S.STOPPED}),
    Action.STOP: frozenset({S.RUNNING}),
    "reboot_soft": frozenset({S.RUNNING}),
    "reboot_hard": frozenset({S.RUNNING, S.STOPPED, S.PAUSED, S.SUSPENDED, S.FAILED}),
    Action.PAUSE: frozenset({S.RUNNING}),
    Action.UNPAUSE: frozenset({S.PAUSED}),
    Action.SUSPEND: frozenset({S.RUNNING}),
    Action.RESUME: frozenset({S.SUSPENDED}),
    Action.SNAPSHOT: frozenset({S.RUNNING, S.STOPPED, S.PAUSED, S.SUSPENDED}),
    Action.RESTORE: frozenset({S.RUNNING, S.STOPPED}),
    Action.RESIZE: frozenset({S.RUNNING, S.STOPPED}),
    Action.DELETE: frozenset({S.PENDING, S.RUNNING, S.PAUSED, S.SUSPENDED, S.STOPPED, S.FAILED, S.BLOCKED, S.UNKNOWN}),
}
# The actions asked of an existing instance (create makes one; a snapshot delete acts on a snapshot, a
# volume reclaim on a volume a deleted instance kept).
INSTANCE_ACTIONS = [a for a in Action.values if a not in (Action.CREATE, Action.SNAPSHOT_DELETE, Action.VOLUME_RECLAIM)]
# The power actions and the status that proves each done (the others have their own post-conditions).
SETTLES_AT: dict[str, str] = {
    Action.START: S.RUNNING,
    Action.STOP: S.STOPPED,
    Action.PAUSE: S.PAUSED,
    Action.UNPAUSE: S.RUNNING,
    Action.SUSPEND: S.SUSPENDED,
    Action.RESUME: S.RUNNING,
}
STATUS_BADGE = {
    S.RUNNING: "green",
    S.PENDING: "blue",
    S.STARTING: "blue",
    S.STOPPING: "blue",
    S.PAUSED: "amber",
    S.SUSPENDED: "amber",
    S.STOPPED: "grey",
    S.FAILED: "red",
    S.BLOCKED: "red",
    S.UNKNOWN: "purple",
    S.DELETED: "grey",
}


def state_table_key(action: str, params: dict) -> str:
    """The ALLOWED_FROM row of an action with its parameters (a reboot's row depends on its type)."""
    return f"reboot_{params.get('type', 'soft')}" if action == Action.REBOOT else action
