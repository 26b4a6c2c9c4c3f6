"""The one writer of a task set's state (docs/architecture.md, "One writer per row"), and its announcements.

Each move is announced in the writer's transaction (`taskset_announced`, sender=TaskSet): `state` for every
state the set takes (its birth as ACTIVE included), and `finished` once every element made has ended (a
FINISHED set at once; a CANCELLED one when its last stopped element has ended), with the counts by state.
The event feed (notifications, connected in its apps.py) copies each announcement as a `set.<type>` entry, so
a set's state and its entry commit or vanish together, as a task's do.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.dispatch import Signal
from django.utils import timezone

from cloudpivot.exceptions import InvalidTransition
from tasks.choices import TERMINAL
from tasksets.choices import SET_TRANSITIONS, TaskSetState
from tasksets.models import SetElement, TaskSet
from tasksets.selectors import taskset_counts

logger = logging.getLogger(__name__)

# sender=TaskSet, task_set=…, type="state" | "finished", message=…, data={…}, at=<when>; sent in the transaction.
taskset_announced = Signal()


def taskset_transition(*, task_set: TaskSet, to: str, reason: str = "") -> bool:
    """Move the set to `to` if SET_TRANSITIONS allows it, by compare-and-set on the state it was read in.

    False when another writer moved it first (nothing is written then); InvalidTransition for a move the table
    does not have. The caller usually holds the set's row lock, so the compare-and-set is a second guard.
    A move to FINISHED is also the set's end (`taskset_end`); a move back to ACTIVE (a retry) opens it again.
    """
    if to not in SET_TRANSITIONS.get(task_set.state, ()):
        raise InvalidTransition(f"a {task_set.state} task set cannot become {to}")
    now = timezone.now()
    finished_at = now if to in (TaskSetState.FINISHED, TaskSetState.CANCELLED) else None
    fields = {"state": to, "state_reason": reason, "state_changed_at": now, "finished_at": finished_at}
    if to == TaskSetState.ACTIVE:
        fields["ended_at"] = None
    was = task_set.state
    moved = TaskSet.objects.filter(pk=task_set.pk, state=was).update(**fields, updated_at=now)
    if not moved:
        return False
    logger.info("task set %s: %s → %s %s", task_set.short_id, was, to, reason)
    for name, value in fields.items():
        setattr(task_set, name, value)
    taskset_announce_state(task_set=task_set, was=was, at=now)
    if to == TaskSetState.FINISHED:
        taskset_end(task_set=task_set)
    return True


def taskset_announce_state(*, task_set: TaskSet, was: str | None, at: dt.datetime) -> None:
    """The set's `set.state` announcement (`was` None: it was just accepted)."""
    to, reason = task_set.state, task_set.state_reason
    message = f"{was} → {to}" if was else f"accepted: {task_set.total} elements"
    _announce(
        task_set,
        "state",
        message + (f": {reason}" if reason else ""),
        {"from": was, "to": to, "reason": reason, "total": task_set.total},
        at,
    )


def taskset_end(*, task_set: TaskSet) -> None:
    """Every element made has ended (the caller, holding the set's lock, knows): `set.finished` with the counts,
    once per end (`ended_at`); a retry that opens the set again ends it again later, with new counts."""
    if task_set.ended_at is not None:
        return
    now = timezone.now()
    if not TaskSet.objects.filter(pk=task_set.pk, ended_at__isnull=True).update(ended_at=now):
        return
    task_set.ended_at = now
    counts = {name: n for name, n in taskset_counts(task_sets=[task_set])[task_set.pk].items() if n}
    words = ", ".join(f"{n} {name}" for name, n in sorted(counts.items(), key=lambda item: -item[1]))
    _announce(
        task_set,
        "finished",
        f"{task_set.state.lower()}: {words or 'no elements'}",
        {"state": task_set.state, "total": task_set.total, "counts": counts},
        now,
    )


def taskset_announce_deleted(*, task_set: TaskSet, by: Any) -> None:
    """`set.deleted`, in the transaction that deletes the set: its elements stay, as ordinary tasks."""
    made = SetElement.objects.filter(task_set=task_set).count()
    _announce(
        task_set,
        "deleted",
        f"deleted by {by}; its {made} element tasks stay as tasks",
        {"state": task_set.state, "total": task_set.total, "elements": made, "by": by.get_username()},
        timezone.now(),
    )


def taskset_open_elements(task_set: TaskSet) -> bool:
    """Whether an element made has not ended yet (a cancelled set ends when the last one does)."""
    return SetElement.objects.filter(task_set=task_set).exclude(task__state__in=TERMINAL).exists()


def _announce(task_set: TaskSet, type_: str, message: str, data: dict[str, Any], at: dt.datetime) -> None:
    taskset_announced.send(sender=TaskSet, task_set=task_set, type=type_, message=message, data=data, at=at)


def taskset_note(*, task_set: TaskSet, reason: str) -> None:
    """Say why an open set does not go on (an element that could not be made), or that it goes on again ("")."""
    if task_set.state_reason != reason:
        TaskSet.objects.filter(pk=task_set.pk).update(state_reason=reason, updated_at=timezone.now())
        task_set.state_reason = reason
