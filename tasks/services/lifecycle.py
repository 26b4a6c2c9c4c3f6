"""The one writer of Task.state: row locks, transitions and the public event history (DESIGN §3)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from cloudpivot import realtime
from cloudpivot.exceptions import Conflict, InvalidTransition, NotFound
from tasks import dispatch
from tasks.choices import HOLDS_QUOTA, TERMINAL, TRANSITIONS, TaskState
from tasks.models import Attempt, Task, TaskEvent

logger = logging.getLogger(__name__)


def task_lock(task_id: Any) -> Task:
    """Lock the task row for the rest of the transaction (on SQLite the IMMEDIATE transaction already serializes)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("task_lock() must run inside transaction.atomic()")
    try:
        return Task.objects.select_for_update().get(pk=task_id)
    except Task.DoesNotExist:
        raise NotFound(f"task {task_id} not found") from None


def lock_task_and_attempt(attempt: Attempt) -> tuple[Task, Attempt]:
    """Lock the task, then the attempt: every writer takes them in this order, so two never deadlock."""
    task = task_lock(attempt.task_id)
    return task, Attempt.objects.select_for_update().get(pk=attempt.pk)


def attempt_superseded_or_closed(attempt: Attempt, task: Task | None = None) -> bool:
    """The one "may this attempt still report?" question: not once it is closed or a later attempt exists."""
    return attempt.is_closed or attempt.number != (task or attempt.task).attempts_count


def attempt_refuse_if_closed(attempt: Attempt, task: Task) -> None:
    """A closed or superseded attempt gets 409 attempt_closed."""
    if attempt_superseded_or_closed(attempt, task):
        raise Conflict(f"attempt {attempt.external_name} is closed; stop reporting", code="attempt_closed")


def event_append(*, task: Task, type: str, message: str = "", data: dict[str, Any] | None = None) -> TaskEvent:
    """Append one public event with the next per-task seq. The task must be locked by the caller."""
    task.last_event_seq += 1
    Task.objects.filter(pk=task.pk).update(last_event_seq=task.last_event_seq)
    return _event_create(task, type, message, data)


def _event_create(task: Task, type: str, message: str, data: dict[str, Any] | None) -> TaskEvent:
    """The event row for the seq already counted (and saved) on the task."""
    event = TaskEvent.objects.create(task=task, seq=task.last_event_seq, type=type, message=message, data=data or {})
    realtime.ring_on_commit(task_id=task.pk, project_id=task.project_id, seq=event.seq)
    return event


def task_transition(
    *, task: Task, to: str, reason: str = "", data: dict[str, Any] | None = None, also: dict[str, Any] | None = None
) -> Task:
    """Move a locked task to `to` if the state machine allows it, with its event, in the caller's transaction.

    `also`: other fields of the task the caller changes with it (set on `task` already), written in the
    same UPDATE as the state and the event counter: one statement per transition.
    """
    if to not in TRANSITIONS.get(task.state, ()):
        raise InvalidTransition(f"a {task.state} task cannot become {to}")
    now = timezone.now()
    previous = task.state
    task.state = to
    task.state_reason = reason
    task.state_changed_at = now
    fields = ["state", "state_reason", "state_changed_at"]
    if to == TaskState.RUNNING and task.started_at is None:
        task.started_at = now
        fields.append("started_at")
    if to in TERMINAL:
        task.finished_at = now
        fields.append("finished_at")
    elif task.finished_at is not None:
        task.finished_at = None
        fields.append("finished_at")
    task.last_event_seq += 1
    fields.append("last_event_seq")
    Task.objects.filter(pk=task.pk).update(
        **{name: getattr(task, name) for name in fields}, **(also or {}), updated_at=now
    )
    _event_create(task, "state", reason or f"{previous} → {to}", {"from": previous, "to": to, **(data or {})})
    logger.info("task %s: %s → %s %s", task.short_id, previous, to, reason)
    if previous in HOLDS_QUOTA and to not in HOLDS_QUOTA:
        on_commit_once(dispatch.wake_admission_if_waiting)  # a waiting task may fit now
    if to == TaskState.RETRY_WAIT:
        on_commit_once(dispatch.wake_reconciler)  # it learns the retry's time
    return task


def on_commit_once(hook: Any) -> None:
    """`hook` after commit, once per transaction however many tasks asked for it."""
    connection = transaction.get_connection()
    if not any(registered is hook for _savepoints, registered, _robust in connection.run_on_commit):
        transaction.on_commit(hook)
