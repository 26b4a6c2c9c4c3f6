"""Protocol v2: one batched report from a host agent (or a VM Runner) applied in one transaction.

The per-attempt rules are v1's (runner_reports.py, logs.py): events in seq order exactly once, log
bytes at the stream's length exactly once, nothing new for a closed or superseded attempt. What v2
adds is the batch: every attempt of the report in one transaction, its tasks and attempts locked in one
query each; the reports with progress alone (log bytes, progress events: a running program's steady
state) applied in memory and written in a few bulk queries whatever the batch's size (chunks, events,
their feed copies, the tasks' seq counters, the attempts' counters); a report that changes state
(started, result, exited, lost) applied alone in a savepoint, so one refused attempt does not fail the
others. Then liveness for every attempt the agent holds in one UPDATE, the agent's confirmations of
removed run directories (cleanup done), and the hand-out of new assignments.

For an agent, admission happens here too (issue 11: no background job per task per step): when its
`local` connections have PENDING tasks, one transaction admits what fits (admission.connection_admit,
with its per-project order and quotas) and hands out every attempt the agent does not hold yet. A
cheap look first keeps a sync with nothing due free of write transactions. Whatever a crash
interrupts is redone by the next sync: the database says what is admitted and handed out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from cloudpivot import realtime
from cloudpivot.exceptions import Conflict
from cloudpivot.rows import objects_insert, rows_update
from tasks.choices import AttemptState, CleanupState, TaskState
from tasks.models import Attempt, LogChunk, Task, TaskEvent
from tasks.services.admission import HandOut, connection_admit
from tasks.services.faults import isolated
from tasks.services.lifecycle import (
    Transitions,
    attempt_state_change,
    attempt_superseded_or_closed,
    task_events_appended,
)
from tasks.services.logs import log_append_locked, log_counters_save
from tasks.services.runner_reports import (
    runner_assignment,
    runner_events_apply_locked,
    runner_progress_event,
    runner_verified_alive,
)

HANDOUT_LIMIT = 100
# What an answer and a heartbeat read of the attempts named (a report locks and reads its attempt whole): a
# whole task row (its spec, a dozen dates) for each of 50 attempts was most of an empty sync's CPU.
STANDING_FIELDS = (
    "task_id",
    "external_name",
    "number",
    "acked_seq",
    "log_stdout_bytes",
    "log_stderr_bytes",
    "stop_requested_at",
    "closed_at",
    "task__state",
    "task__attempts_count",
)
# What a batch of progress alone (log bytes, progress events: a running program's steady state) reads of the rows
# it locks: every column of 100 tasks (the spec, a dozen dates) and of their attempts was a third of such a sync's
# CPU. A batch with a state change (started, result, exited, lost) locks whole rows: its transitions need them.
PROGRESS_TASK_FIELDS = ("id", "project_id", "state", "attempts_count", "last_event_seq", "normalized")
PROGRESS_ATTEMPT_FIELDS = (
    "id",
    "task_id",
    "number",
    "external_name",
    "acked_seq",
    "closed_at",
    "stop_requested_at",
    "log_stdout_bytes",
    "log_stderr_bytes",
    "log_bytes",
    "log_dropped_bytes",
    "last_heartbeat_at",
    "runner_contact_at",
    "usage",
    "runner_boot_id",
    "runner_pid",
)


@dataclass
class SyncScope:
    """What the caller may report on: an agent's `local` connections, or a VM Runner's one attempt."""

    agent_name: str = ""
    connection_ids: list[int] = field(default_factory=list)
    runs_dirs: dict[int, str] = field(default_factory=dict)
    attempt: Attempt | None = None

    def attempts(self, names: set[str]) -> dict[str, Attempt]:
        if self.attempt is not None:
            return {self.attempt.external_name: self.attempt} if self.attempt.external_name in names else {}
        found = (
            Attempt.objects.select_related("task")
            .filter(external_name__in=names, task__connection_id__in=self.connection_ids)
            .only(*STANDING_FIELDS)
        )
        return {attempt.external_name: attempt for attempt in found}

    def named(self, names: set[str]) -> Any:
        """The caller's attempts of these names, as a query (to lock them by: _Batch.locked)."""
        found = Attempt.objects.filter(external_name__in=names)
        if self.attempt is not None:
            return found.filter(pk=self.attempt.pk)
        return found.filter(task__connection_id__in=self.connection_ids)


def sync_apply(
    *,
    scope: SyncScope,
    agent: dict[str, Any],
    known: list[str],
    reports: list[dict[str, Any]],
    cleaned: list[str] | None = None,
) -> dict:
    """Apply the reports and cleanup confirmations, count the call as a sign of life for every attempt named,
    answer, admit and hand out."""
    names = set(known) | {report["attempt"] for report in reports}
    errors: dict[str, dict[str, Any]] = {}
    if cleaned:
        _cleanup_confirmed(scope, cleaned)
    if not reports:
        attempts = scope.attempts(names)
        _heartbeat(scope, agent, [attempt for name, attempt in attempts.items() if name in known])
        return sync_answer(scope=scope, names=names, attempts=attempts)
    reported = {report["attempt"] for report in reports}
    progress = all(event["type"] == "progress" for report in reports for event in report["events"])
    with transaction.atomic():
        # The reported attempts are found and locked in the same two queries (no read of them before).
        batch = _Batch.locked(scope.named(reported), progress=progress, agent=agent)
        attempts = {attempt.external_name: attempt for attempt in batch.attempts.values()}
        for report in sorted(reports, key=lambda r: _lock_order(attempts.get(r["attempt"]))):
            attempt = attempts.get(report["attempt"])
            if attempt is None:
                errors[report["attempt"]] = _not_yours(report["attempt"])
                continue
            if attempt_superseded_or_closed(attempt):
                if any(event["seq"] > attempt.acked_seq for event in report["events"]):
                    message = f"attempt {attempt.external_name} is closed; stop reporting"
                    errors[attempt.external_name] = {**_standing(attempt), "closed": True, "error": message}
            elif _progress_only(attempt, report):
                batch.apply(attempt, report)
            else:
                error = batch.apply_alone(attempt, report)
                if error:
                    errors[attempt.external_name] = {**_standing(attempt), "closed": True, "error": error}
        batch.write()
    if rest := names - reported:  # held, with nothing to report this time
        attempts |= scope.attempts(rest)
    _heartbeat(scope, agent, [attempt for name, attempt in attempts.items() if name in known], batch.alive)
    return sync_answer(scope=scope, names=names, attempts=attempts, answers=errors)


def _progress_only(attempt: Attempt, report: dict[str, Any]) -> bool:
    """Whether the events this report adds are progress alone: no state changes, so nothing to do but store."""
    types = {event["seq"]: event["type"] for event in report["events"]}
    seq = attempt.acked_seq + 1
    while seq in types:
        if types[seq] != "progress":
            return False
        seq += 1
    return True


class _Batch:
    """A batch's attempts, locked with their tasks in two queries, and its writes, in a few bulk queries.

    Progress-only reports (the steady state of a running program: log bytes and progress) are applied in
    memory and written together by `write`; a report with a state change (started, result, exited, lost)
    is applied alone in a savepoint, so a refused one still leaves the others applied.
    """

    ATTEMPT_FIELDS = (
        "log_stdout_bytes",
        "log_stderr_bytes",
        "log_bytes",
        "log_dropped_bytes",
        "acked_seq",
        "last_heartbeat_at",
        "runner_contact_at",
        "usage",
        "runner_boot_id",
        "runner_pid",
    )

    def __init__(self, tasks: dict[Any, Task], attempts: dict[int, Attempt], agent: dict[str, Any]) -> None:
        self.tasks = tasks
        self.attempts = attempts
        self.agent = agent
        self.chunks: list[LogChunk] = []
        self.events: list[TaskEvent] = []
        self.dirty: dict[int, Attempt] = {}
        self.alive: set[int] = set()  # attempts whose heartbeat the batch wrote (in `write`)

    @classmethod
    def locked(cls, attempts: Any, *, progress: bool = False, agent: dict[str, Any] | None = None) -> _Batch:
        """The attempts of the query `attempts` and their tasks, locked: tasks first, then attempts, each in id
        order, the order every writer takes them in (no deadlock). The query is a subquery of the task lock's:
        the rows are found and locked in two queries. `progress`: only the columns a progress batch uses."""
        tasks_locked = Task.objects.select_for_update().filter(pk__in=attempts.values("task_id")).order_by("pk")
        if progress:
            tasks_locked = tasks_locked.only(*PROGRESS_TASK_FIELDS)
        tasks = {task.pk: task for task in tasks_locked}
        if not tasks:
            return cls({}, {}, agent or {})
        locked = Attempt.objects.select_for_update().filter(pk__in=attempts.values("pk"))
        if progress:
            locked = locked.only(*PROGRESS_ATTEMPT_FIELDS)
        found = {}
        for attempt in locked.order_by("pk"):
            if attempt.task_id in tasks:  # (an attempt's task is never another: only a deleted one is missing)
                attempt.task = tasks[attempt.task_id]
                found[attempt.pk] = attempt
        return cls(tasks, found, agent or {})

    def apply(self, attempt: Attempt, report: dict[str, Any]) -> None:
        """Logs first, then the progress events, in memory; `write` stores them."""
        task = attempt.task
        _logs_append(attempt, report["logs"], self.chunks)
        by_seq = {event["seq"]: event for event in report["events"]}
        while attempt.acked_seq + 1 in by_seq:
            self.events += filter(None, [runner_progress_event(task, attempt, by_seq[attempt.acked_seq + 1])])
            attempt.acked_seq += 1
        now = timezone.now()
        attempt.last_heartbeat_at = now
        attempt.runner_contact_at = attempt.runner_contact_at or now
        if report.get("usage"):
            attempt.usage = report["usage"]
        attempt.runner_boot_id = str(self.agent.get("boot_id") or "")[:64]  # the heartbeat's columns (_heartbeat)
        attempt.runner_pid = self.agent.get("pid")
        self.dirty[attempt.pk] = attempt

    def apply_alone(self, attempt: Attempt, report: dict[str, Any]) -> str:
        """A report that changes state, in a savepoint after what is pending; the refusal's message, or ""."""
        self.write()  # what came before is stored first: a rollback below then leaves it, and the seqs, intact
        try:
            with transaction.atomic():
                chunks: list[LogChunk] = []
                _apply_report(attempt, report, chunks)
                objects_insert(LogChunk, chunks)
        except Conflict as exc:
            attempt.task.refresh_from_db()
            attempt.refresh_from_db()
            return exc.message
        return ""

    def write(self) -> None:
        """Log chunks, events (and their feed copies), the tasks' seq counters, the attempts' counters."""
        objects_insert(LogChunk, self.chunks)
        if self.events:
            objects_insert(TaskEvent, self.events)
            task_events_appended.send(sender=TaskEvent, events=self.events)
            tasks = {event.task_id: self.tasks[event.task_id] for event in self.events}
            rows_update(Task, ["last_event_seq"], list(tasks.values()))
            for task in tasks.values():
                realtime.ring_on_commit(task_id=task.pk, project_id=task.project_id, seq=task.last_event_seq)
        if self.dirty:
            rows_update(Attempt, list(self.ATTEMPT_FIELDS), list(self.dirty.values()))
            self.alive.update(self.dirty)
        self.chunks, self.events, self.dirty = [], [], {}


def _lock_order(attempt: Attempt | None) -> tuple[int, int]:
    """Task rows are locked in id order, so two batches never wait for each other in a circle."""
    return (attempt.task_id, attempt.pk) if attempt is not None else (0, 0)


def sync_answer(
    *, scope: SyncScope, names: set[str], attempts: dict[str, Attempt] | None = None, answers: dict | None = None
) -> dict[str, Any]:
    """Where the server stands for every attempt named, and the assignments the caller does not hold yet."""
    attempts = scope.attempts(names) if attempts is None else attempts
    answers = dict(answers or {})
    for name in names:
        if name not in answers:
            attempt = attempts.get(name)
            answers[name] = _standing(attempt) if attempt is not None else _not_yours(name)
    return {"protocol": 2, "attempts": answers, "assignments": _handout(scope, names)}


def sync_has_news(answer: dict[str, Any], stopping: list[str]) -> bool:
    """Whether a long-poll should answer now: something the agent does not know yet."""
    if answer["assignments"]:
        return True
    return any(
        part.get("closed") or (part.get("stop_requested") and name not in stopping)
        for name, part in answer["attempts"].items()
    )


def _cleanup_confirmed(scope: SyncScope, names: list[str]) -> None:
    """The agent removed these closed attempts' run directories: their cleanup is done (one UPDATE)."""
    if not scope.connection_ids:
        return
    Attempt.objects.filter(
        external_name__in=names,
        task__connection_id__in=scope.connection_ids,
        closed_at__isnull=False,
        cleanup_state=CleanupState.PENDING,
    ).update(cleanup_state=CleanupState.DONE, cleanup_error="")


def _not_yours(name: str) -> dict[str, Any]:
    return {"closed": True, "error": f"{name} is not an attempt of this caller"}


def _standing(attempt: Attempt) -> dict[str, Any]:
    return {
        "acked_seq": attempt.acked_seq,
        "log_offsets": {"stdout": attempt.log_stdout_bytes, "stderr": attempt.log_stderr_bytes},
        "stop_requested": attempt.stop_requested_at is not None,
        "closed": attempt_superseded_or_closed(attempt),
    }


def _apply_report(attempt: Attempt, report: dict[str, Any], chunks: list[LogChunk]) -> Attempt:
    """Logs first, then events (`exited` comes after the last byte), then one UPDATE of the attempt.

    The attempt and its task are locked (by the batch) and open."""
    task = attempt.task
    _logs_append(attempt, report["logs"], chunks)
    runner_events_apply_locked(task=task, attempt=attempt, events=report["events"])
    extra = {"usage": report["usage"]} if report.get("usage") else {}
    log_counters_save(attempt, acked_seq=attempt.acked_seq, last_heartbeat_at=timezone.now(), **extra)
    return attempt


# Per web process: when each caller's heartbeat was last written, keyed by who the credential says the caller is
# (the host agent's name, or the VM Runner's attempt), never by a number the caller chose. Stale keys are
# dropped once there are many: a caller whose key went is written once more, nothing else.
_last_heartbeat: dict[str | int, tuple[float, frozenset[int]]] = {}
HEARTBEAT_KEYS_KEPT = 10_000


def _heartbeat(scope: SyncScope, agent: dict[str, Any], held: list[Attempt], alive: set[int] | None = None) -> None:
    """Every call is a sign of life for what the caller holds: one UPDATE, at most once per heartbeat interval.

    `alive`: the attempts whose heartbeat the call's batch already wrote (with their counters, in its
    transaction); when that is every open attempt held, no UPDATE is needed (a busy agent's steady state).
    A task that went UNKNOWN because its reporter fell silent is verified by the first call after.
    """
    if not held:
        return
    ids = frozenset(attempt.pk for attempt in held if not attempt.is_closed)
    key = scope.agent_name or scope.attempt.pk
    now = time.monotonic()
    last = _last_heartbeat.get(key)
    if last and ids <= last[1] and now - last[0] < settings.RUNNER_HEARTBEAT_SECONDS:
        return
    if len(_last_heartbeat) >= HEARTBEAT_KEYS_KEPT:
        stale = now - settings.RUNNER_HEARTBEAT_SECONDS
        for old in [k for k, (at, _) in _last_heartbeat.items() if at < stale]:
            del _last_heartbeat[old]
    _last_heartbeat[key] = (now, ids)
    if missing := ids - (alive or set()):
        Attempt.objects.filter(pk__in=missing).update(
            last_heartbeat_at=timezone.now(),
            runner_boot_id=str(agent.get("boot_id") or "")[:64],
            runner_pid=agent.get("pid"),
        )
    for attempt in held:
        if attempt.task.state == TaskState.UNKNOWN and not attempt.is_closed:
            runner_verified_alive(attempt)


def _handout(scope: SyncScope, held: set[str]) -> list[dict[str, Any]]:
    """Open attempts the caller should run and does not hold yet; an agent's move them to STARTING."""
    if scope.attempt is not None:
        attempt = scope.attempt
        attempt.refresh_from_db()
        if attempt.external_name in held or attempt_superseded_or_closed(attempt):
            return []
        return [runner_assignment(attempt=attempt)]
    if not scope.connection_ids:
        return []
    open_attempts = Attempt.objects.filter(
        task__connection_id__in=scope.connection_ids,
        task__state__in=(TaskState.SUBMITTING, TaskState.STARTING),
        closed_at__isnull=True,
        stop_requested_at__isnull=True,
    ).exclude(external_name__in=held)
    waiting = Task.objects.filter(
        connection_id__in=scope.connection_ids, connection__dispatch_enabled=True, state=TaskState.PENDING
    )
    admit, handing = _both_exist(waiting, open_attempts)
    if not admit and not handing:
        return []  # the usual answer of a long-poll's look (one query): no write transaction for it
    hand_out = HandOut(prepare=partial(_handout_prepare, scope=scope), limit=HANDOUT_LIMIT)
    with transaction.atomic():
        # What the sync admits is handed out in the same writes (admission.HandOut): the attempts are inserted as
        # handed out, each task written once, its two events (→ SUBMITTING, → STARTING) in one INSERT.
        admitted = sum(
            isolated(
                f"admission on connection {connection_id}",
                lambda pk=connection_id: connection_admit(connection_id=pk, announce=False, hand_out=hand_out),
            )
            for connection_id in (scope.connection_ids if admit else ())
        )
        assignments = []
        room = HANDOUT_LIMIT - len(hand_out.handed)
        if room > 0 and (handing or admitted > len(hand_out.handed)):  # attempts admitted before, or not handed yet
            assignments = _handout_open(scope, open_attempts.exclude(pk__in=[a.pk for a in hand_out.handed]), room)
        assignments += [runner_assignment(attempt=attempt) for attempt in hand_out.handed]
    return assignments


def _handout_open(scope: SyncScope, open_attempts: Any, room: int) -> list[dict[str, Any]]:
    """Open attempts the agent does not hold (admitted before, or handed to it before a restart), in a few queries:
    the SUBMITTING ones are recorded as handed out with one UPDATE of the attempts and one of the tasks."""
    candidates = list(open_attempts.order_by("task__created_at").only("pk", "task_id")[:room])
    ids = [candidate.pk for candidate in candidates]
    locked = _Batch.locked(Attempt.objects.filter(pk__in=ids)).attempts  # two queries, in the writers' lock order
    transitions = Transitions()
    handed: list[Attempt] = []
    assignments = []
    for candidate in candidates:
        attempt = locked.get(candidate.pk)
        if attempt is None:
            continue
        task = attempt.task
        if attempt_superseded_or_closed(attempt) or task.state not in (TaskState.SUBMITTING, TaskState.STARTING):
            continue
        if task.state == TaskState.SUBMITTING:
            _handout_prepare(task, attempt, transitions, scope=scope)
            handed.append(attempt)
        assignments.append(attempt)
    rows_update(Attempt, list(HANDOUT_FIELDS), handed)
    transitions.write()
    return [runner_assignment(attempt=attempt) for attempt in assignments]


def _both_exist(first: Any, second: Any) -> tuple[bool, bool]:
    """Whether each query has a row, in one round trip (`SELECT EXISTS (…), EXISTS (…)`), not one per query."""
    parts, params = [], []
    for query in (first, second):
        sql, values = query.values("pk")[:1].query.sql_with_params()
        parts.append(f"EXISTS ({sql})")
        params += values
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(parts)}", params)
        row = cursor.fetchone()
    return bool(row[0]), bool(row[1])


# What a hand-out records on an attempt (attempt_start's record of a created execution).
HANDOUT_FIELDS = ("external_ref", "cloud_created_at", "start_error", "runner_contact_at", "state", "updated_at")


def _handout_prepare(task: Task, attempt: Attempt, transitions: Transitions, *, scope: SyncScope) -> None:
    """What attempt_start records for a created execution, done here when the agent takes the attempt first: on the
    attempt in memory (inserted or updated by the caller), and the task's move to STARTING added to `transitions`."""
    now = timezone.now()
    attempt.external_ref = f"{scope.runs_dirs.get(task.connection_id, '')}/{attempt.external_name}"
    attempt.cloud_created_at = now
    attempt.start_error = ""
    attempt.runner_contact_at = attempt.runner_contact_at or now  # the agent asked: contact
    attempt.updated_at = now
    if attempt.state == AttemptState.CREATED:
        attempt_state_change(attempt, AttemptState.STARTING)  # stored by the caller's rows_update, under the locks
    transitions.add(
        task=task,
        to=TaskState.STARTING,
        reason=f"handed to the host agent {scope.agent_name}",
        data={"attempt": attempt.number, "external_ref": attempt.external_ref},
    )


def _logs_append(attempt: Attempt, pieces: list[dict[str, Any]], chunks: list[LogChunk]) -> None:
    """A report's log pieces, each at its stream's offset exactly once (the chunks are inserted by the caller)."""
    for piece in pieces:
        log_append_locked(
            task=attempt.task,
            attempt=attempt,
            stream=piece["stream"],
            offset=piece["offset"],
            data=piece["data"],
            chunks=chunks,
        )
