"""The refresh schedule: observe every instance's server (one list call per connection).

An instance whose server is gone from the cloud without a delete from CloudPivot becomes Unknown,
with the evidence in its reason; instances with an operation in flight are left to that operation.
A server found stopped while CloudPivot wants it running was stopped by its guest (or behind CloudPivot's
back): stopped becomes the observed *and* the desired state, recorded as an Operation by "guest" on the
instance's timeline, so nothing boots it again until someone starts it with a new boot id (the seed's rule).

The cloud's list call is slow and rows change meanwhile (a delete finishes, an action starts): every
write is conditional on the status and operation pointer as read, so a stale observation is dropped,
never written over what the Operation just recorded.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from cloudpivot.accounts.audit import audit_system
from resources.backends import get_instance_backend
from resources.backends.base import BackendError, Unsupported
from resources.choices import OPEN_OPERATION_STATES, Action, InstanceStatus, OperationState, PowerState
from resources.models import Instance
from resources.services.operations import operation_create
from resources.services.readiness import readiness_observe
from resources.services.run import server_reason


def instances_refresh() -> str:
    instances = (
        Instance.objects.exclude(status=InstanceStatus.DELETED)
        .exclude(server_id="")
        .select_related("connection", "operation")
    )
    by_connection: dict[int, list[Instance]] = {}
    for instance in instances:
        by_connection.setdefault(instance.connection_id, []).append(instance)
    seen = changed = 0
    for rows in by_connection.values():
        try:
            backend = get_instance_backend(rows[0].connection)
            servers = backend.servers()
        except (Unsupported, BackendError):
            continue  # the cloud did not answer: nothing is concluded from silence
        for instance in rows:
            if instance.operation_id and instance.operation and instance.operation.state in OPEN_OPERATION_STATES:
                continue
            seen += 1
            changed += _observe(instance, servers.get(instance.server_id), backend)
            _look_at_the_guest(instance, servers.get(instance.server_id), backend)
    return f"observed {seen} instances, {changed} changed"


def _look_at_the_guest(instance: Instance, view, backend) -> None:
    """Booting → ready (resources/services/readiness.py); not counted as a change of status. A cloud that
    does not answer is asked again next time."""
    try:
        readiness_observe(instance, view, backend)
    except BackendError:
        return


def _as_read(instance: Instance):
    """The row, only if it still has the status and operation pointer this observation started from."""
    return Instance.objects.filter(pk=instance.pk, status=instance.status, operation_id=instance.operation_id)


def _observe(instance: Instance, view, backend) -> int:
    now = timezone.now()
    if view is None:
        view = backend.server(instance.server_id)  # not in our tagged list: ask for it by id before concluding
    if view is None:
        if instance.status == InstanceStatus.UNKNOWN:
            _as_read(instance).update(observed_at=now)
            return 0
        reason = (
            f"server {instance.server_id} not found in the cloud at {now:%Y-%m-%d %H:%M:%S} UTC "
            "(deleted outside CloudPivot?)"
        )
        written = _as_read(instance).update(
            status=InstanceStatus.UNKNOWN, status_reason=reason, status_changed_at=now, observed_at=now
        )
        if not written:
            return 0  # the row changed while the cloud was read: this observation is stale
        audit_system(
            action="resources:instance-unknown",
            object_ref=str(instance.pk),
            details={"server_id": instance.server_id, "was": instance.status, "reason": reason},
        )
        return 1
    if view.status == InstanceStatus.STOPPED and view.settled and instance.desired_power_state == PowerState.RUNNING:
        return _guest_stopped(instance, view, backend)
    reason = server_reason(view)
    if view.status == instance.status and (reason == instance.status_reason or _kept_reason(instance, reason)):
        _as_read(instance).update(observed_at=now, address=view.address)
        return 0
    written = _as_read(instance).update(
        status=view.status, status_reason=reason, status_changed_at=now, observed_at=now, address=view.address
    )
    if not written:
        return 0  # the row changed while the cloud was read: this observation is stale
    if view.status != instance.status:
        audit_system(
            action="resources:instance-status",
            object_ref=str(instance.pk),
            details={"server_id": instance.server_id, "was": instance.status, "now": view.status, "reason": reason},
        )
    return 1


GUEST_STOPPED = "the guest stopped itself"
# The event's words by who stopped it (ServerView.evidence["stopped_by"]; Nova cannot tell a guest's
# power-off from an os-stop made outside CloudPivot, so that is said as such).
STOPPED_BY = {
    "guest": ("guest", GUEST_STOPPED),
    "outside": ("outside CloudPivot", "stopped outside CloudPivot"),
    "": ("guest or outside CloudPivot", f"{GUEST_STOPPED}, or it was stopped outside CloudPivot"),
}


def _kept_reason(instance: Instance, reason: str) -> bool:
    """A "stopped itself" reason stays while the cloud shows what it was written from."""
    said = instance.status_reason
    return said.startswith(tuple(words for _, words in STOPPED_BY.values())) and f" ({reason}), " in said


def _guest_stopped(instance: Instance, view, backend) -> int:
    """Stopped though CloudPivot asked for running: the cloud is told to keep it stopped (KubeVirt: runStrategy
    Halted), then the row says Stopped, desired stopped, with an Operation by "guest" as its event.

    The row lock is held across that one cloud call, so a start asked meanwhile waits and then acts on the
    stopped instance (its own PATCH lands after ours); a cloud that does not answer leaves everything as it
    was, for the next refresh."""
    now = timezone.now()
    by, words = STOPPED_BY.get(view.evidence.get("stopped_by") or "", STOPPED_BY[""])
    reason = (
        f"{words} ({server_reason(view)}), not CloudPivot: it stays stopped until it is started "
        "again with a new boot id"
    )
    with transaction.atomic():
        locked = _as_read(instance).filter(desired_power_state=PowerState.RUNNING).select_for_update().first()
        if locked is None:
            return 0  # the row changed while the cloud was read: this observation is stale
        try:
            backend.keep_stopped(instance.server_id)
        except BackendError:
            return 0
        operation = operation_create(
            project_id=instance.project_id,
            instance_id=instance.pk,
            action=Action.STOP,
            requested_by=None,
            params={"by": by},
            state=OperationState.SUCCEEDED,
            started_at=now,
            finished_at=now,
            result={"event": words, "observed": view.evidence},
        )
        Instance.objects.filter(pk=instance.pk).update(
            status=InstanceStatus.STOPPED,
            desired_power_state=PowerState.STOPPED,
            status_reason=reason,
            status_changed_at=now if instance.status != InstanceStatus.STOPPED else instance.status_changed_at,
            observed_at=now,
        )
    audit_system(
        action="resources:instance-guest-stopped",
        object_ref=str(instance.pk),
        details={
            "server_id": instance.server_id,
            "was": instance.status,
            "now": InstanceStatus.STOPPED,
            "by": by,
            "operation": str(operation.pk),
        },
    )
    return 1
