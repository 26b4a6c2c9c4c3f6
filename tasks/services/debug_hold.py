"""Debug hold: a failed attempt's pod or VM is kept `debug_hold_minutes` for its owner to get in, then removed.

The hold is one column, `Attempt.hold_until`: the reconcile pass's cleanup leaves the attempt alone until
then (reconcile.cleanups_pending), so a restart of any process loses nothing. What is held:
- an attempt that FAILED (the program's exit, the cloud's refusal after creating it), and on a cloud with a
  Runner (OpenStack) one that TIMED_OUT: the Runner stopped the program, the VM stays up. A Kubernetes
  timeout deletes the Job, and a cancel or a success is never held; nor an attempt whose object vanished.
- a retry runs beside the held attempt: both count against the project's quotas until the held one is
  cleaned up (tasks.selectors.task_quota_usage), as both hold the cloud's resources.
The task's owner or a project admin may release a hold (`debug_hold_release`): cleanup is due at once.
Each hold's start, release and expiry is a task event and an audit entry.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from cloudpivot.accounts.audit import audit_system
from cloudpivot.exceptions import Conflict
from clusters.backends import backend_uses_runner
from clusters.backends.local import LOCAL
from clusters.debug_hold import debug_hold_access
from tasks import dispatch
from tasks.choices import CleanupState, TaskState
from tasks.models import Attempt, Task
from tasks.selectors import task_check_can_act
from tasks.services.lifecycle import event_append, task_lock

logger = logging.getLogger(__name__)


def hold_minutes(task: Task) -> int:
    return int((task.normalized or {}).get("debug_hold_minutes") or 0)


def debug_hold_begin(
    *, task: Task, attempt: Attempt, outcome: str, now: dt.datetime, data: dict[str, Any] | None
) -> None:
    """Called by attempt_close on a locked attempt that is being closed: start its hold if it gets one."""
    minutes = hold_minutes(task)
    if not minutes or task.backend == LOCAL or not attempt.external_ref:
        return
    if outcome != TaskState.FAILED and not (outcome == TaskState.TIMED_OUT and backend_uses_runner(task.backend)):
        return
    attempt.hold_until = now + dt.timedelta(minutes=minutes)
    attempt.hold_access = {"pod": data["pod"]} if data and data.get("pod") else {}
    until = attempt.hold_until.isoformat()
    event_append(
        task=task,
        type="debug_hold",
        message=f"attempt {attempt.number} ({attempt.external_name}) is kept for debugging for {minutes} minutes, "
        f"until {until}; then it is cleaned up",
        data={"attempt": attempt.number, "until": until, "minutes": minutes},
    )
    _audit("tasks:debug-hold-started", attempt, {"task": str(task.pk), "until": until, "minutes": minutes})


def debug_hold_release(*, task_id: Any, user: AbstractBaseUser) -> list[int]:
    """End every running hold of the task now (owner or project admin); the numbers of the released attempts.

    Conflict when nothing of the task is held."""
    with transaction.atomic():
        task = task_lock(task_id)
        task_check_can_act(user=user, task=task)
        now = timezone.now()
        held = list(
            Attempt.objects.select_for_update()
            .filter(task=task, cleanup_state=CleanupState.PENDING, hold_until__gt=now, hold_released_at__isnull=True)
            .order_by("number")
        )
        if not held:
            raise Conflict("nothing of this task is held for debugging", code="no_debug_hold")
        for attempt in held:
            attempt.hold_until = now
            attempt.hold_released_at = now
            attempt.hold_released_by = user.get_username()
            attempt.save(update_fields=["hold_until", "hold_released_at", "hold_released_by", "updated_at"])
            event_append(
                task=task,
                type="debug_hold_released",
                message=f"the debug hold of attempt {attempt.number} was released by {user}; cleaning it up",
                data={"attempt": attempt.number, "by": user.get_username()},
            )
            _audit("tasks:debug-hold-released", attempt, {"task": str(task.pk)}, actor=user)
        transaction.on_commit(dispatch.wake_reconciler)
    return [attempt.number for attempt in held]


def debug_holds_end(*, connection_id: Any, project_id: Any) -> int:
    """A project lost its grant on a connection: its held attempts there are cleaned up now (the cleanup says
    the hold ended). Returns how many."""
    now = timezone.now()
    ended = Attempt.objects.filter(
        task__connection_id=connection_id,
        task__project_id=project_id,
        cleanup_state=CleanupState.PENDING,
        hold_until__gt=now,
    ).update(hold_until=now, updated_at=now)
    if ended:
        transaction.on_commit(dispatch.wake_reconciler)
    return ended


def debug_hold_ended(attempt: Attempt) -> None:
    """After the cleanup of a held attempt: an expired hold (not released) says so, once."""
    if attempt.hold_until is None or attempt.hold_released_at is not None:
        return
    with transaction.atomic():
        task = task_lock(attempt.task_id)
        event_append(
            task=task,
            type="debug_hold_expired",
            message=f"the debug hold of attempt {attempt.number} ended; what it kept was cleaned up",
            data={"attempt": attempt.number},
        )
        _audit("tasks:debug-hold-expired", attempt, {"task": str(task.pk), "until": attempt.hold_until.isoformat()})


def debug_hold_view(attempt: Attempt, now: dt.datetime | None = None) -> dict[str, Any] | None:
    """The `debug_hold` of an attempt for the API and the page (None: never held)."""
    if attempt.hold_until is None:
        return None
    now = now or timezone.now()
    active = attempt.cleanup_state == CleanupState.PENDING and attempt.hold_until > now
    view: dict[str, Any] = {
        "until": attempt.hold_until,
        "active": active,
        "released_at": attempt.hold_released_at,
        "released_by": attempt.hold_released_by,
        "how_to_get_in": None,
    }
    if active:
        view["how_to_get_in"] = debug_hold_access(
            attempt.task.connection,
            external_name=attempt.external_name,
            external_ref=attempt.external_ref,
            facts=attempt.hold_access or {},
        )
    return view


def _audit(action: str, attempt: Attempt, details: dict[str, Any], actor: AbstractBaseUser | None = None) -> None:
    """An audit entry for the system's own step (the release's request is audited by the middleware as well)."""
    audit_system(
        action=action, object_ref=attempt.external_name, details={"attempt": attempt.number, **details}, actor=actor
    )
