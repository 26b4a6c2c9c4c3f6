"""The one writer of a task set's state (docs/architecture.md, "One writer per row")."""

from __future__ import annotations

import logging

from django.utils import timezone

from cloudpivot.exceptions import InvalidTransition
from tasksets.choices import SET_TRANSITIONS, TaskSetState
from tasksets.models import TaskSet

logger = logging.getLogger(__name__)


def taskset_transition(*, task_set: TaskSet, to: str, reason: str = "") -> bool:
    """Move the set to `to` if SET_TRANSITIONS allows it, by compare-and-set on the state it was read in.

    False when another writer moved it first (nothing is written then); InvalidTransition for a move the table
    does not have. The caller usually holds the set's row lock, so the compare-and-set is a second guard.
    """
    if to not in SET_TRANSITIONS.get(task_set.state, ()):
        raise InvalidTransition(f"a {task_set.state} task set cannot become {to}")
    now = timezone.now()
    finished_at = now if to in (TaskSetState.FINISHED, TaskSetState.CANCELLED) else None
    fields = {"state": to, "state_reason": reason, "state_changed_at": now, "finished_at": finished_at}
    moved = TaskSet.objects.filter(pk=task_set.pk, state=task_set.state).update(**fields, updated_at=now)
    if not moved:
        return False
    logger.info("task set %s: %s → %s %s", task_set.short_id, task_set.state, to, reason)
    for name, value in fields.items():
        setattr(task_set, name, value)
    return True


def taskset_note(*, task_set: TaskSet, reason: str) -> None:
    """Say why an open set does not go on (an element that could not be made), or that it goes on again ("")."""
    if task_set.state_reason != reason:
        TaskSet.objects.filter(pk=task_set.pk).update(state_reason=reason, updated_at=timezone.now())
        task_set.state_reason = reason
