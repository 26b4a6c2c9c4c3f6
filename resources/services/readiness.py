"""Running is not ready: the hypervisor runs the server, but is the guest up? (issue 18, the seed's "ready").

`Instance.status` stays the cloud's observation (Running when Nova says ACTIVE, KubeVirt says Running) and the
state table is unchanged; beside it, `ready` says the guest answered since its last boot, and
`readiness_reason` what showed it or, while booting, what is awaited. Each cloud decides (its backend's
readiness()): KubeVirt the VMI's AgentConnected condition, OpenStack an SSH banner where the control plane
reaches the guest or cloud-init's marker on the console log.

- A create, start, reboot, restore or resize resets it to booting before the cloud is asked, keeping what the
  previous boot left (its last console marker, its VMI's uid) so that evidence of an earlier boot never counts.
- The Operation's read-back looks once when it succeeds with the server Running; the refresh schedule looks at
  every Running, not yet ready instance each minute; a refresh that finds a ready guest's server no longer
  running (stopped, rebooting outside CloudPivot) resets it too.

Every write is conditional on the readiness as read, so a look that raced a reset is dropped.

A change of `ready` (booting → ready, ready → booting again) is recorded as a status change is: an audit entry
`resources:instance-readiness` and, through `instance_readiness_changed` (in the same transaction as the write),
an `instance.readiness` entry of the event feed (notifications/capture.py). A look that changes nothing, or
only the reason a booting guest is waited for, records nothing.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from cloudpivot.accounts.audit import audit_system
from resources.backends import get_instance_backend
from resources.backends.base import BackendError, ServerView
from resources.choices import Action, InstanceStatus
from resources.models import Instance

logger = logging.getLogger(__name__)

S = InstanceStatus
# The actions that boot the guest (again): readiness starts over before the cloud is asked.
BOOTS = frozenset({Action.CREATE, Action.START, Action.REBOOT, Action.RESTORE, Action.RESIZE})
# Statuses in which the guest that was up still is (the hypervisor holds its memory).
GUEST_KEPT = frozenset({S.RUNNING, S.PAUSED, S.SUSPENDED})
BOOTING = "booting: the guest is looked at once the server runs"
# Sent with instance, ready, reason and at, inside the transaction that wrote the change (the feed copies it).
instance_readiness_changed = Signal()


def readiness_reset(instance: Instance, backend) -> None:
    """Booting again: not ready, with what the previous boot left read now (before the cloud is asked)."""
    baseline = backend.boot_baseline(instance.server_id) if instance.server_id else ""
    now = timezone.now()
    with transaction.atomic():
        row = Instance.objects.select_for_update().filter(pk=instance.pk)
        was_ready = row.values_list("ready", flat=True).first()
        row.update(ready=False, readiness_reason=BOOTING, boot_baseline=baseline, readiness_changed_at=now)
        if was_ready:
            instance_readiness_changed.send(sender=Instance, instance=instance, ready=False, reason=BOOTING, at=now)
    if was_ready:
        _audit(instance, ready=False, reason=BOOTING)
    instance.ready, instance.readiness_reason, instance.boot_baseline = False, BOOTING, baseline
    instance.readiness_changed_at = now


def readiness_observe(instance: Instance, view: ServerView | None, backend) -> bool:
    """Look at the guest of a Running, settled server not yet seen ready; True if the row changed.

    A ready guest whose server is seen neither running, paused nor suspended went down: reset."""
    if view is None or not view.settled:
        return False
    if view.status not in GUEST_KEPT:
        if not instance.ready:
            return False
        before = instance.readiness_changed_at
        if not Instance.objects.filter(pk=instance.pk, ready=True, readiness_changed_at=before).exists():
            return False
        readiness_reset(instance, backend)
        return True
    if view.status != S.RUNNING or instance.ready:
        return False
    found = backend.readiness(view, baseline=instance.boot_baseline)
    if not found.ready and found.reason == instance.readiness_reason:
        return False
    now = timezone.now()
    updates = {"readiness_reason": found.reason}
    if found.ready:
        updates |= {"ready": True, "readiness_changed_at": now}
    with transaction.atomic():
        written = Instance.objects.filter(
            pk=instance.pk, ready=False, readiness_changed_at=instance.readiness_changed_at
        ).update(**updates)
        if written and found.ready:
            instance_readiness_changed.send(sender=Instance, instance=instance, ready=True, reason=found.reason, at=now)
    if written and found.ready:
        _audit(instance, ready=True, reason=found.reason)
    return bool(written)


def readiness_words(ready: bool) -> str:
    return "ready" if ready else "not ready"


def _audit(instance: Instance, *, ready: bool, reason: str) -> None:
    """After the write has committed, as the refresh audits a status change (a failed audit never undoes it)."""
    audit_system(
        action="resources:instance-readiness",
        object_ref=str(instance.pk),
        details={
            "server_id": instance.server_id,
            "was": readiness_words(not ready),
            "now": readiness_words(ready),
            "reason": reason,
        },
    )


def readiness_after_operation(instance_id, view: ServerView | None, connection) -> None:
    """The Operation's read-back: one look once it succeeded. The Operation's outcome stands whatever
    happens here (a cloud that does not answer is looked at again by the refresh)."""
    if view is None or view.status != S.RUNNING:
        return
    try:
        instance = Instance.objects.select_related("connection").get(pk=instance_id)
        readiness_observe(instance, view, get_instance_backend(connection))
    except BackendError as exc:
        logger.info("readiness of instance %s not looked at: %s", instance_id, exc.message)
    except Exception:
        logger.exception("readiness of instance %s not looked at", instance_id)
