"""The one writer of Task.state and Attempt.state: row locks, transitions and the public event history (DESIGN §3)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from cloudpivot import realtime
from cloudpivot.exceptions import Conflict, InvalidTransition, NotFound
from cloudpivot.rows import objects_insert, rows_update
from tasks import dispatch
from tasks.choices import ATTEMPT_TRANSITIONS, HOLDS_QUOTA, TERMINAL, TRANSITIONS, AttemptState, TaskState
from tasks.models import Attempt, Task, TaskEvent

logger = logging.getLogger(__name__)

# Sent (sender=TaskEvent, events=[…]) inside the transaction that appends task events, by every writer of them
# (one event or a batch): whoever copies every event (the notifications feed) copies them in the same transaction.
task_events_appended = Signal()


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


def events_append_each(*, tasks: list[Task], type: str, message: str, also: tuple[str, ...] = ()) -> None:
    """event_append for many locked tasks, in a few statements whatever their number: each task's next seq, one
    UPDATE of the tasks (the counter, and the fields named in `also` the caller set on them), one INSERT of the
    events, their feed copies (task_events_appended), a ring for each. The tasks need only their id, project,
    state and event counter read (under the lock), and the `also` fields set."""
    if not tasks:
        return
    events = []
    for task in tasks:
        task.last_event_seq += 1
        events.append(TaskEvent(task=task, seq=task.last_event_seq, type=type, message=message, data={}))
    rows_update(Task, ["last_event_seq", *also], tasks)
    objects_insert(TaskEvent, events)
    task_events_appended.send(sender=TaskEvent, events=events)
    for task in tasks:
        realtime.ring_on_commit(task_id=task.pk, project_id=task.project_id, seq=task.last_event_seq)


def _event_create(task: Task, type: str, message: str, data: dict[str, Any] | None) -> TaskEvent:
    """The event row for the seq already counted (and saved) on the task."""
    event = TaskEvent.objects.create(task=task, seq=task.last_event_seq, type=type, message=message, data=data or {})
    task_events_appended.send(sender=TaskEvent, events=[event])
    realtime.ring_on_commit(task_id=task.pk, project_id=task.project_id, seq=event.seq)
    return event


def task_transition(
    *, task: Task, to: str, reason: str = "", data: dict[str, Any] | None = None, also: dict[str, Any] | None = None
) -> Task:
    """Move a locked task to `to` if the state machine allows it, with its event, in the caller's transaction.

    `also`: other fields of the task the caller changes with it (set on `task` already), written in the
    same UPDATE as the state and the event counter: one statement per transition.
    """
    now = timezone.now()
    previous, fields = _state_change(task, to, reason, now)
    Task.objects.filter(pk=task.pk).update(
        **{name: getattr(task, name) for name in fields}, **(also or {}), updated_at=now
    )
    _event_create(task, "state", reason or f"{previous} → {to}", {"from": previous, "to": to, **(data or {})})
    _transition_done(task, previous, to, reason)
    return task


def _state_change(task: Task, to: str, reason: str, now: Any) -> tuple[str, list[str]]:
    """The transition on the task in memory, and the seq of its event counted: the state it left, the fields set."""
    if to not in TRANSITIONS.get(task.state, ()):
        raise InvalidTransition(f"a {task.state} task cannot become {to}")
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
    return previous, fields


def _transition_done(task: Task, previous: str, to: str, reason: str) -> None:
    logger.info("task %s: %s → %s %s", task.short_id, previous, to, reason)
    if previous in HOLDS_QUOTA and to not in HOLDS_QUOTA:
        on_commit_once(dispatch.wake_admission_if_waiting)  # a waiting task may fit now
    if to == TaskState.RETRY_WAIT:
        on_commit_once(dispatch.wake_reconciler)  # it learns the retry's time


# ---------------------------------------------------------------------------- the attempt's state
def attempt_state_change(attempt: Attempt, to: str) -> str:
    """The attempt's move in memory, checked against ATTEMPT_TRANSITIONS; the state it left.

    Writers that store many locked attempts in one statement (the host agent's hand-out) use it directly: the
    rows are locked, so the state they were read in is the state they are stored over.
    """
    if to not in ATTEMPT_TRANSITIONS.get(attempt.state, ()):
        raise InvalidTransition(f"a {attempt.state} attempt cannot become {to}")
    previous, attempt.state = attempt.state, to
    return previous


def attempt_transition(*, attempt: Attempt, to: str, fields: Iterable[str] | None = None) -> None:
    """Move an attempt to `to` by compare-and-set on the state it was read in, writing `fields` of it (set by the
    caller; None: every field, a whole-row write as `save()` makes) in the same UPDATE.

    The task event that goes with the move (task_transition's, in the caller's transaction) is its public record.
    A row that moved on meanwhile (a writer that did not lock it) is a Conflict, and nothing is written.
    """
    previous = attempt_state_change(attempt, to)
    attempt.updated_at = timezone.now()
    names = _ATTEMPT_FIELDS if fields is None else {*fields, "updated_at"} - {"state"}
    values = {name: getattr(attempt, name) for name in names}
    if not Attempt.objects.filter(pk=attempt.pk, state=previous).update(state=to, **values):
        attempt.state = previous
        raise Conflict(f"attempt {attempt.external_name} is no longer {previous}", code="attempt_moved")


def attempt_start_claim(*, attempt_id: int, state: str, updated_at: Any) -> bool:
    """Claim an unstarted attempt's start (→ STARTING) by compare-and-set on the state and time it was read at:
    of two passes that read it, one wins. False: another pass has it, or it moved on."""
    if AttemptState.STARTING not in ATTEMPT_TRANSITIONS.get(state, ()):
        return False
    claimed = Attempt.objects.filter(pk=attempt_id, state=state, updated_at=updated_at, external_ref="")
    return bool(claimed.update(state=AttemptState.STARTING, updated_at=timezone.now()))


_ATTEMPT_FIELDS = frozenset(
    field.attname for field in Attempt._meta.concrete_fields if not field.primary_key and field.name != "state"
)


class Transitions:
    """task_transition for many locked tasks: applied in memory, written in a few statements whatever their number.

    `add` checks the state machine and counts the event's seq as task_transition does; `write` stores every
    task with one UPDATE (rows_update: the fields the transitions set, and `also`), every event with one
    INSERT, their feed copies with another (task_events_appended), and rings each task once. A task may
    move more than once (PENDING → SUBMITTING → STARTING): each move has its event, the UPDATE stores where
    it ends. The tasks must be locked, and their state, reason and dates read under the lock.
    """

    def __init__(self) -> None:
        self.tasks: dict[Any, Task] = {}
        self.events: list[TaskEvent] = []
        self.fields: set[str] = set()

    def __len__(self) -> int:
        return len(self.tasks)

    def add(
        self,
        *,
        task: Task,
        to: str,
        reason: str = "",
        data: dict[str, Any] | None = None,
        also: dict[str, Any] | None = None,
    ) -> None:
        now = timezone.now()
        previous, fields = _state_change(task, to, reason, now)
        for name, value in (also or {}).items():
            setattr(task, name, value)
        task.updated_at = now
        self.fields.update(fields, also or (), ["updated_at"])
        message = reason or f"{previous} → {to}"
        data = {"from": previous, "to": to, **(data or {})}
        self.events.append(TaskEvent(task=task, seq=task.last_event_seq, type="state", message=message, data=data))
        self.tasks[task.pk] = task
        _transition_done(task, previous, to, reason)

    def write(self) -> None:
        if not self.tasks:
            return
        tasks = list(self.tasks.values())
        rows_update(Task, sorted(self.fields), tasks)
        objects_insert(TaskEvent, self.events)
        task_events_appended.send(sender=TaskEvent, events=self.events)
        for task in tasks:
            realtime.ring_on_commit(task_id=task.pk, project_id=task.project_id, seq=task.last_event_seq)
        self.tasks, self.events, self.fields = {}, [], set()


def on_commit_once(hook: Any) -> None:
    """`hook` after commit, once per transaction however many tasks asked for it."""
    connection = transaction.get_connection()
    if not any(registered is hook for _savepoints, registered, _robust in connection.run_on_commit):
        transaction.on_commit(hook)
