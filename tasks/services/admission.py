"""Admission: which PENDING tasks get an attempt now, within the connection's and the projects' limits."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from django.db import transaction
from django.db.models import Count, Exists, OuterRef

from cloudpivot.accounts import quotas
from cloudpivot.accounts.models import Project
from cloudpivot.crash_points import crash_point
from cloudpivot.rows import objects_insert
from clusters.backends import backend_hands_out
from clusters.backends.local import agent_pid, connection_runs_dir
from clusters.models import CloudConnection
from tasks import dispatch
from tasks.choices import HOLDS_QUOTA, TaskState
from tasks.models import Attempt, Task
from tasks.selectors import task_quota_usage
from tasks.services.attempts import MAX_ATTEMPTS, attempt_create, attempt_intent, attempts_announce
from tasks.services.faults import isolated
from tasks.services.lifecycle import Transitions, event_append, events_append_each, on_commit_once, task_lock

logger = logging.getLogger(__name__)
# How many of each owner's oldest PENDING tasks in each project one pass looks at; the rest move up in later passes.
PER_PROJECT_LIMIT = 50
# How many tasks one transaction tells what the connection's dispatch switch means for them.
REASON_BATCH = 500


def admit_all(*, agent_served_too: bool = True) -> int:
    """Admit what fits on every connection with dispatch on that has PENDING tasks; a connection's error does not
    stop the others. A connection with dispatch off is not looked at: its tasks were told why they wait when
    dispatch went off, or when they came to wait there (`connection_dispatch_said`).

    With `agent_served_too=False` (the reconcile pass) a `local` connection whose host agent runs is
    left to that agent: its sync admits and hands out in one transaction (runner_sync.py). One whose
    agent is down is admitted here, and the pass then launches the agent.
    """
    pending = Task.objects.filter(connection=OuterRef("pk"), state=TaskState.PENDING)
    with_pending = CloudConnection.objects.filter(Exists(pending), dispatch_enabled=True).order_by()
    return sum(
        isolated(f"admission on connection {c.pk}", lambda pk=c.pk: connection_admit(connection_id=pk))
        for c in list(with_pending)
        if agent_served_too or not local_agent_serves(c)
    )


def admission_wake() -> None:
    """Ask for admission now: the host agents' syncs and the reconcile pass do it from the database."""
    dispatch.enqueue_admission()


def local_agent_serves(connection: CloudConnection) -> bool:
    """Whether a live host agent admits and takes this connection's work itself."""
    return backend_hands_out(connection.backend) and agent_pid(connection_runs_dir(connection)) is not None


def queue_heads(connection: CloudConnection, limit: int = PER_PROJECT_LIMIT) -> list[Task]:
    """The oldest PENDING tasks of each owner in each project on the connection, oldest first.

    Per (project, owner), so neither a project whose own quota holds back any number of tasks nor
    one owner's long queue (a task set keeps up to TASK_SET_AHEAD elements PENDING) hides another
    project's or another user's tasks from admission: `fair_order` then decides who goes first.
    One query for the (project, owner) pairs with PENDING tasks (a walk of the connection's entries in
    tasks_task_pending_heads, an index of the PENDING rows alone, without reading the table), one per
    pair for its oldest `limit` (read in order from the same index, however long another owner's queue).
    """
    pending = Task.objects.filter(connection=connection, state=TaskState.PENDING)
    pairs = list(pending.order_by().values_list("project_id", "owner_id").distinct())
    heads: list[Task] = []
    for project_id, owner_id in pairs:
        mine = pending.filter(project_id=project_id, owner_id=owner_id).select_related("project")
        heads += mine.order_by("created_at", "id")[:limit]
    return sorted(heads, key=lambda task: (task.created_at, task.id))


def fair_order(heads: list[Task], running: dict[tuple[int, int], int]) -> list[Task]:
    """The queue heads in the order admission offers them the room: fair share, least running first.

    `running`: the tasks holding quota on the connection per (project, owner). Two levels, each the same rule:
    between the projects on the connection, the next task is one of the project with the fewest running (counting
    those admitted before it in this order); within a project, the owner with the fewest running goes next. Ties
    go to the older task, and each owner's own tasks keep their submission order. So one more task of a user or a
    project that has none running goes before the next of one that runs many (a 10,000-element set beside a single
    task: the single task takes the next free slot), and equal shares take turns (round-robin). Computed at once
    as a sort: each task's key is its owner's running count plus its place among its owner's heads, then (between
    projects) its project's running count plus its place in its project's order.
    """
    project_running: dict[int, int] = {}
    for (project_id, _owner), count in running.items():
        project_running[project_id] = project_running.get(project_id, 0) + count
    owner_places: dict[tuple[int, int], int] = {}
    by_project: dict[int, list[tuple[tuple, Task]]] = {}
    for task in sorted(heads, key=lambda task: (task.created_at, task.id)):
        pair = (task.project_id, task.owner_id)
        place = owner_places[pair] = owner_places.get(pair, -1) + 1
        by_project.setdefault(task.project_id, []).append(
            ((running.get(pair, 0) + place, task.created_at, task.id), task)
        )
    keyed: list[tuple[tuple, Task]] = []
    for project_id, tasks in by_project.items():
        tasks.sort(key=lambda keyed_task: keyed_task[0])
        base = project_running.get(project_id, 0)
        keyed += [((base + place, task.created_at, task.id), task) for place, (_key, task) in enumerate(tasks)]
    keyed.sort(key=lambda keyed_task: keyed_task[0])
    return [task for _key, task in keyed]


@dataclass
class HandOut:
    """What a host agent's sync asks of admission (runner_sync): hand the attempts it admits out in the same writes.

    `prepare(task, attempt, transitions)` records the hand-out on the new attempt (not inserted yet) and adds the
    task's next move to `transitions`; at most `limit` attempts in all. `handed`: the attempts admitted and handed
    out, once written (a bulk write that failed and was done again one task at a time hands out none: the sync's
    hand-out of SUBMITTING attempts takes them).
    """

    prepare: Callable[[Task, Attempt, Transitions], None]
    limit: int
    handed: list[Attempt] = field(default_factory=list)


class _BulkWriteFailed(Exception):
    pass


def connection_admit(
    *, connection_id: int, limit: int = PER_PROJECT_LIMIT, announce: bool = True, hand_out: HandOut | None = None
) -> int:
    """Admit PENDING tasks of one connection while they fit, in fair-share order (`fair_order`); return how many.

    1. Lock the connection row, then the projects' rows (in id order): admissions of one
       connection, and of one project across connections, happen one at a time, so no two
       workers can both take the last free slot of a quota. FOR NO KEY UPDATE: it excludes another
       admission as FOR UPDATE would, but not the foreign-key check (FOR KEY SHARE) at the COMMIT
       of a transaction that holds a task row admission waits for (a cancel inserting its
       feed entry): with FOR UPDATE the two deadlocked. Then the queue heads (in id order), read again
       under the lock: one a cancel took meanwhile is not admitted.
    2. Walk the queue heads in fair-share order (`fair_order`: between projects on the connection and between
       owners within a project, least running first; each owner's tasks first in, first admitted). A task that
       does not fit its project's quota waits with the reason, and so does every later task of its project (no
       smaller task overtakes it there); once the connection runs `max_active_tasks`, every other waits too.
    3. Write what was admitted in a few statements whatever the number (issue 11: SQLite's one writer):
       one INSERT of the attempts, one UPDATE of the tasks, one INSERT of their events and one of the feed
       copies (lifecycle.Transitions). Should that write fail (a bad row), the pass is done again one task at
       a time, each in its own savepoint: the bad one is skipped with an `error` event, the others go on.
    """
    try:
        return _admission_pass(connection_id, limit, _Bulk(announce, hand_out))
    except _BulkWriteFailed:
        logger.exception("admitting on connection %s in one write failed; admitting one task at a time", connection_id)
        return _admission_pass(connection_id, limit, None, announce)


def _admission_pass(connection_id: int, limit: int, bulk: _Bulk | None, announce: bool = True) -> int:
    admitted_any: list[int] = []
    with transaction.atomic():
        # First of the callbacks after commit: the crash point sits before any doorbell or handout answer.
        transaction.on_commit(lambda: admitted_any and crash_point("admission.committed"))
        connection = CloudConnection.objects.select_for_update(no_key=True).get(pk=connection_id)
        if not connection.dispatch_enabled:  # its tasks say so already (connection_dispatch_said)
            return 0
        pending = queue_heads(connection, limit)
        if not pending:
            return 0
        off = dispatch_off_reason(connection.cloud_id)
        if any(task.state_reason == off for task in pending):  # dispatch came on without the admin (a shell)
            transaction.on_commit(partial(connection_dispatch_said, connection_id=connection.pk))
        project_ids = sorted({task.project_id for task in pending})
        list(Project.objects.select_for_update(no_key=True).filter(pk__in=project_ids).order_by("pk"))
        pending = _still_pending(pending)
        running = _running(connection)
        active = sum(running.values())
        ledger = {pid: _QuotaLedger(pid, connection.pk) for pid in project_ids}
        blocked = quotas.admission_holds(project_ids)
        for task in fair_order(pending, running):
            footprint = quotas.task_footprint(task.normalized)
            reason = blocked.get(task.project_id)
            if reason is None and connection.max_active_tasks and active >= connection.max_active_tasks:
                reason = f"waiting: {connection.cloud_id} runs {active}/{connection.max_active_tasks} tasks"
            reason = reason or ledger[task.project_id].blocking(footprint, task.project)
            if reason:
                blocked[task.project_id] = reason
                task_set_waiting_reason(task=task, reason=reason)
                continue
            if (bulk is not None and bulk.take(task)) or isolated(
                "admission", lambda task=task: _admit_one(task.pk, announce), task_ids=[task.pk]
            ):
                ledger[task.project_id].take(footprint)
                active += 1
                admitted_any.append(task.pk)
        if bulk is not None:
            try:
                bulk.write()
            except Exception as exc:  # rolls the pass back (on PostgreSQL the transaction is spoilt): done again
                raise _BulkWriteFailed from exc
        return len(admitted_any)


def _running(connection: CloudConnection) -> dict[tuple[int, int], int]:
    """The connection's tasks that hold quota (admitted, not ended) per (project, owner), in one query."""
    rows = (
        Task.objects.filter(connection=connection, state__in=HOLDS_QUOTA)
        .values_list("project_id", "owner_id")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return {(project_id, owner_id): n for project_id, owner_id, n in rows}


# What another writer may change on a PENDING task while admission holds its connection (a cancel, a waiting
# reason, an error event): read again under the row lock, as lifecycle.Transitions needs them.
_LOCKED_COLUMNS = ("state", "state_reason", "state_changed_at", "last_event_seq", "attempts_count", "finished_at")


def _still_pending(heads: list[Task]) -> list[Task]:
    """The queue heads locked (in id order, as every writer takes task rows) and read again: those still PENDING."""
    locked = Task.objects.select_for_update().filter(pk__in=[task.pk for task in heads]).order_by("pk")
    now = {row[0]: row[1:] for row in locked.values_list("pk", *_LOCKED_COLUMNS)}
    still = []
    for task in heads:
        if task.pk in now:
            for name, value in zip(_LOCKED_COLUMNS, now[task.pk], strict=True):
                setattr(task, name, value)
            if task.state == TaskState.PENDING:
                still.append(task)
    return still


class _Bulk:
    """One admission pass's attempts and transitions in memory, written together (and handed out, for an agent)."""

    def __init__(self, announce: bool, hand_out: HandOut | None) -> None:
        self.announce = announce
        self.hand_out = hand_out
        self.transitions = Transitions()
        self.attempts: list[Attempt] = []

    def take(self, task: Task) -> bool:
        """The task's next attempt, in memory; False for one that cannot have another (it goes alone, and fails)."""
        if task.attempts_count >= MAX_ATTEMPTS:
            return False
        self.attempts.append(attempt_intent(task=task, reason="admitted", transitions=self.transitions))
        return True

    def write(self) -> None:
        if not self.attempts:
            return
        handing: list[Attempt] = []
        if self.hand_out is not None:
            handing = self.attempts[: max(0, self.hand_out.limit - len(self.hand_out.handed))]
            for attempt in handing:
                self.hand_out.prepare(attempt.task, attempt, self.transitions)
        objects_insert(Attempt, self.attempts)
        self.transitions.write()
        attempts_announce(self.attempts[0].task, announce=self.announce)  # one connection: woken once
        if self.hand_out is not None:
            self.hand_out.handed += handing


def _admit_one(task_id, announce: bool = True) -> int:
    """The task's first (or next) attempt, in a savepoint of its own so that its failure undoes only itself."""
    with transaction.atomic():
        task = task_lock(task_id)
        if task.state != TaskState.PENDING:
            return 0
        attempt_create(task=task, reason="admitted", announce=announce)
        return 1


class _QuotaLedger:
    """A project's quotas and usage for one admission pass, updated as tasks are admitted."""

    def __init__(self, project_id: int, connection_id: int) -> None:
        self.quotas = quotas.quotas_for(project_id=project_id, connection_id=connection_id)
        # vCPU and memory limits hold tasks and instances together (accounts.quotas.shared_usage).
        self.used = {
            q.connection_id: task_quota_usage(project_id=project_id, connection_id=q.connection_id)
            + quotas.shared_usage(project_id=project_id, connection_id=q.connection_id, besides="tasks")
            for q in self.quotas
        }

    def blocking(self, footprint: quotas.Footprint, project: Project) -> str:
        return quotas.blocking_limit(self.quotas, self.used, footprint, project)

    def take(self, footprint: quotas.Footprint) -> None:
        for key in self.used:
            self.used[key] = self.used[key] + footprint


def dispatch_off_reason(cloud_id: str) -> str:
    return f"waiting: dispatch is off on the {cloud_id} cloud until an admin turns it on"


def connection_dispatch_said(*, connection_id: int) -> int:
    """Make the connection's PENDING tasks say what its dispatch switch means for them, once, when it is switched
    (the admin calls this after the save; admission too, should it find dispatch came on some other way): off,
    each says it waits for dispatch; on again, each that said so goes back to waiting for its turn. A task that
    comes to wait while dispatch is off says so from the start (submission, retry), so no admission pass ever
    looks at a connection with dispatch off. Returns how many tasks were told.

    `REASON_BATCH` tasks at a time, each batch in a transaction of its own under the connection's row lock (as
    admission takes it), with the switch read again: a switch turned back meanwhile stops the telling.
    """
    told = 0
    while True:
        with transaction.atomic():
            connection = CloudConnection.objects.select_for_update(no_key=True).filter(pk=connection_id).first()
            if connection is None:
                return told
            off = dispatch_off_reason(connection.cloud_id)
            pending = Task.objects.filter(connection_id=connection_id, state=TaskState.PENDING)
            if connection.dispatch_enabled:
                targets, reason, message = pending.filter(state_reason=off), "", _on_again(connection.cloud_id)
            else:
                targets, reason, message = pending.exclude(state_reason=off), off, off
            batch = list(targets.select_for_update().order_by("pk").only(*_TOLD_COLUMNS)[:REASON_BATCH])
            for task in batch:
                task.state_reason = reason
            events_append_each(tasks=batch, type="waiting", message=message, also=("state_reason",))
            if connection.dispatch_enabled and batch:
                on_commit_once(dispatch.enqueue_admission)
        told += len(batch)
        if len(batch) < REASON_BATCH:
            return told


def _on_again(cloud_id: str) -> str:
    return f"dispatch is on again on the {cloud_id} cloud: waiting for admission"


# What events_append_each reads of a task (and the feed copy of its event).
_TOLD_COLUMNS = ("pk", "project_id", "state", "state_reason", "last_event_seq")


def task_set_waiting_reason(*, task: Task, reason: str) -> None:
    """Say why a PENDING task waits (not a transition: the state stays PENDING). An event when it changes."""
    if task.state_reason == reason:
        return
    with transaction.atomic():
        locked = task_lock(task.pk)
        if locked.state != TaskState.PENDING or locked.state_reason == reason:
            return
        Task.objects.filter(pk=task.pk).update(state_reason=reason)
        event_append(task=locked, type="waiting", message=reason)
    task.state_reason, task.last_event_seq = reason, locked.last_event_seq
