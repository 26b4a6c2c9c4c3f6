"""One reconcile pass: level-triggered, idempotent, safe to run twice at once, and fault-isolated.

The pass does in batches what used to be a background job per task per step (issue 11): it admits,
starts every SUBMITTING attempt and cleans up every closed one of the clouds without a host agent,
per connection. What asks a cloud (start, observe, clean up) is one batch per connection
(`connection_batch`); the ticker runs those side by side (tasks/services/connection_work.py), so one slow
cloud holds up no other (issue 16); a pass called without workers runs them one after the other.
`local` connections are served by their host agent's sync (admission, hand-out, and the agent
confirms cleanup); the pass only launches an agent that is not running, and cleans up
after one that never confirmed. `reconcile_due_at` is the ticker's cheap "anything due?" look.

Each step claims its rows (row locks with skip_locked on PostgreSQL; SQLite's IMMEDIATE
transactions serialize writers), so any number of workers may run passes. Each step
handles its tasks, attempts and connections one at a time through `isolated`: one bad
row or cloud is logged and written on its tasks, and the rest of the pass goes on; a step
that fails as a whole does not stop the steps after it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable

from django.db import transaction
from django.db.models import F, Min, Q
from django.utils import timezone

from clusters.backends import handed_out_kinds
from clusters.backends.local import local_agent_ensure
from clusters.models import CloudConnection
from tasks import dispatch
from tasks.choices import EXECUTING, AttemptState, CleanupState, StopReason, TaskState
from tasks.models import Attempt, Task
from tasks.services.admission import admit_all, local_agent_serves
from tasks.services.attempts import (
    attempt_cleanup,
    attempt_create,
    attempt_request_stop,
    attempt_start,
    attempt_stop_unstarted,
    current_attempt,
)
from tasks.services.connection_work import ConnectionWorkers
from tasks.services.faults import isolated
from tasks.services.lifecycle import attempt_start_claim
from tasks.services.observation import observe_all

logger = logging.getLogger(__name__)
# A SUBMITTING attempt whose start claim nobody renewed for this long is started again (its worker renews it
# while the cloud is asked: tasks/services/start_claim.py).
START_RETRY_SECONDS = 5
# A cleanup that failed is tried again after this long (a cloud that is down is not asked every pass).
CLEANUP_RETRY_SECONDS = 5
# A closed `local` attempt whose agent has not confirmed its cleanup this long after is cleaned up here.
LOCAL_CLEANUP_GRACE_SECONDS = 30
# How often attempts are observed while they execute: the clouds without an agent, whose observation
# moves their tasks, as before; `local` ones, whose agent reports by itself, for liveness and deadlines;
# UNKNOWN tasks, which wait for a person or a Runner that comes back.
OBSERVE_SECONDS = 0.5
OBSERVE_AGENT_SECONDS = 2.0
OBSERVE_UNKNOWN_SECONDS = 5.0
# PENDING tasks that wait for quota are looked at again this often (freed quota also rings the doorbell).
WAITING_SECONDS = 5.0
# Steps of higher apps that the pass runs first (task sets make their next elements Tasks), handed in when Django
# starts (register_pass_step): name → (the step, when it is next due).
PassStepDue = Callable[[dt.datetime, dt.datetime], dt.datetime | None]
_PASS_STEPS: dict[str, tuple[Callable[[], int], PassStepDue]] = {}
# The ticker's pass waits this long at most for the connection batches it started (the rest go on).
PASS_BUDGET_SECONDS = 1.0
# A batch in the ticker takes no new start or cleanup after this long (the rest waits for its next batch).
BATCH_SECONDS = 5.0


def reconcile_pass(workers: ConnectionWorkers | None = None) -> dict[str, int]:
    """Run every step once; return what each did (for logs and the django-q2 result).

    First the steps that only touch the database, here; then each connection's batch of cloud calls:
    with `workers` (the ticker's) side by side, waited for at most PASS_BUDGET_SECONDS; without, here,
    one after the other and to the end (tests, one-off passes).
    """
    steps = {
        **{name: step for name, (step, _due) in _PASS_STEPS.items()},
        "admitted": lambda: admit_all(agent_served_too=False),
        "agents": agents_launched,
        "retried": retries_due,
        "cancelled": cancels_unstarted,
        "timed_out": timeouts_due,
    }
    done = Counter({name: isolated(name, step) for name, step in steps.items()})
    due = isolated("finding the connections with cloud work", lambda: connections_due()) or []
    if workers is None:
        for connection_id in due:
            done.update(connection_batch(connection_id))
    else:
        batches = {
            connection_id: lambda connection_id=connection_id: connection_batch(connection_id, seconds=BATCH_SECONDS)
            for connection_id in due
        }
        finished, skipped = workers.run(batches, budget=PASS_BUDGET_SECONDS)
        done.update(finished)
        done["busy"] = len(skipped)
    return {key: value for key, value in done.items() if value}


def register_pass_step(name: str, *, step: Callable[[], int], due: PassStepDue) -> None:
    """A step of a higher app that each pass runs before admission, so what it makes is admitted in the same pass.

    `step()` does its work and returns how many things it did; `due(last_pass, now)` says cheaply when it next has
    something to do (`now`: at once; None: not until a doorbell), and is asked with the pass's own deadlines.
    Task sets hand theirs in (tasksets/apps.py): they make elements Tasks as room frees (docs/sets.md).
    """
    _PASS_STEPS[name] = (step, due)


def connections_due(now: dt.datetime | None = None) -> list[int]:
    """The connections whose cloud the pass has something to ask: an attempt to start, to observe, to clean up."""
    now = now or timezone.now()
    starts = set(_starts_query(now).values_list("task__connection_id", flat=True))
    executing = set(Task.objects.filter(state__in=EXECUTING).values_list("connection_id", flat=True))
    cleanups = set(_cleanups_query(now).values_list("task__connection_id", flat=True))
    return sorted(starts | executing | cleanups)


def connection_batch(connection_id: int, *, seconds: float | None = None) -> dict[str, int]:
    """Everything the pass asks one connection's cloud, in order: start what is due, observe, clean up.

    With `seconds`, starts and cleanups stop being taken once that long has passed (at least one of
    each is), and the rest waits for the connection's next batch: a batch of a slow cloud ends in
    bounded time, and a connection with a thousand starts to make is still observed every few seconds.
    Each step is `isolated`: one that fails as a whole does not stop the steps after it.
    """
    deadline = time.monotonic() + seconds if seconds is not None else None
    steps = {
        "started": lambda: starts_due(connection_id=connection_id, deadline=deadline),
        "observed": lambda: observe_all(connection_id=connection_id),
        "cleaned": lambda: cleanups_pending(connection_id=connection_id, deadline=deadline),
    }
    return {name: isolated(name, step) for name, step in steps.items()}


def reconcile_wake() -> None:
    """Ring the reconcile doorbell: the ticker looks at once at what is due."""
    dispatch.wake_reconciler()


def retries_due(now: dt.datetime | None = None) -> int:
    """RETRY_WAIT tasks whose persisted backoff has passed get their next Attempt."""
    now = now or timezone.now()
    due = Task.objects.filter(state=TaskState.RETRY_WAIT, next_attempt_at__lte=now).values_list("pk", flat=True)
    return sum(isolated("retry", lambda task_id=task_id: _retry_one(task_id), task_ids=[task_id]) for task_id in due)


def _retry_one(task_id) -> int:
    with transaction.atomic():
        task = Task.objects.select_for_update(skip_locked=True).filter(pk=task_id, state=TaskState.RETRY_WAIT).first()
        if task is None:
            return 0
        last = Attempt.objects.filter(task=task, number=task.attempts_count).values_list("state", flat=True).first()
        if last == AttemptState.INTERRUPTED:
            reason = f"run again after interruption {task.interruptions}"
        else:
            reason = f"retry {task.failed_attempts} of {task.retry_limit}"
        attempt_create(task=task, reason=reason)
        return 1


def cancels_unstarted() -> int:
    """CANCELLING tasks with nothing in a cloud to wait for (a cancel raced the start, or older rows) end CANCELLED."""
    nothing_in_a_cloud = Q(attempts__closed_at__isnull=False) | Q(attempts__external_ref="")
    stuck = Task.objects.filter(nothing_in_a_cloud, state=TaskState.CANCELLING, attempts__number=F("attempts_count"))
    task_ids = set(stuck.values_list("pk", flat=True))
    return sum(
        isolated("cancel", lambda task_id=task_id: _cancel_unstarted_one(task_id), task_ids=[task_id])
        for task_id in task_ids
    )


def _cancel_unstarted_one(task_id) -> int:
    with transaction.atomic():
        task = Task.objects.select_for_update(skip_locked=True).filter(pk=task_id, state=TaskState.CANCELLING).first()
        return int(task is not None and attempt_stop_unstarted(task=task, attempt=current_attempt(task)))


def agents_launched() -> int:
    """A `local` connection with work for its host agent (to admit, to take) and no agent running: launch one."""
    waiting = Task.objects.filter(
        backend__in=handed_out_kinds(), state__in=(TaskState.PENDING, TaskState.SUBMITTING, TaskState.STARTING)
    ).values("connection_id")
    connections = CloudConnection.objects.filter(backend__in=handed_out_kinds(), pk__in=waiting)
    return sum(
        isolated(f"launching the host agent of {c.cloud_id}", lambda c=c: int(local_agent_ensure(c)))
        for c in connections
    )


def starts_due(
    now: dt.datetime | None = None, *, connection_id: int | None = None, deadline: float | None = None
) -> int:
    """Start every SUBMITTING attempt of the clouds without a host agent (of one connection, or of all, one
    connection after the other).

    An attempt is claimed before its cloud is asked (compare-and-set on its row), so two passes never
    ask at once; a start that failed, or whose worker died while asking, is claimed again after
    START_RETRY_SECONDS (a worker still asking renews its claim). `ensure_started` is idempotent (adopt by
    name or create): asking again is safe. Past `deadline` (time.monotonic()) no further attempt is
    claimed: the rest stay due for the next pass.
    """
    now = now or timezone.now()
    due = _starts_query(now)
    if connection_id is not None:
        due = due.filter(task__connection_id=connection_id)
    by_connection = defaultdict(list)
    rows = due.order_by("task__created_at").values_list("pk", "task_id", "task__connection_id", "state", "updated_at")
    for row in rows:
        by_connection[row[2]].append(row)
    count = 0
    for connection_id, rows in by_connection.items():
        count += isolated(
            f"starting on connection {connection_id}",
            lambda rows=rows: _start_batch(rows, deadline),
            task_ids=[row[1] for row in rows],
        )
    return count


def _starts_query(now: dt.datetime):
    cutoff = now - dt.timedelta(seconds=START_RETRY_SECONDS)
    return (
        Attempt.objects.filter(task__state=TaskState.SUBMITTING, external_ref="", closed_at__isnull=True)
        .exclude(task__backend__in=handed_out_kinds())
        .filter(Q(state=AttemptState.CREATED) | Q(updated_at__lt=cutoff))
    )


def _start_batch(rows: list, deadline: float | None) -> int:
    count = 0
    for attempt_id, task_id, _connection_id, state, updated_at in rows:
        # Claimed as of now, not as of the batch's start: an earlier start of the batch may have taken a while.
        if attempt_start_claim(attempt_id=attempt_id, state=state, updated_at=updated_at):
            count += isolated("start", lambda attempt_id=attempt_id: _start(attempt_id), task_ids=[task_id])
        if _past(deadline):
            break
    return count


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _start(attempt_id: int) -> int:
    attempt_start(attempt_id=attempt_id)
    return 1


def timeouts_due(now: dt.datetime | None = None) -> int:
    """Running tasks past their total wall time are stopped; the Runner's report then ends them TIMED_OUT."""
    now = now or timezone.now()
    candidates = Task.objects.filter(state=TaskState.RUNNING, timeout_seconds__isnull=False, started_at__isnull=False)
    return sum(
        isolated("timeout", lambda task_id=task_id, limit=timeout: _time_out_one(task_id, limit), task_ids=[task_id])
        for task_id, started_at, timeout in candidates.values_list("pk", "started_at", "timeout_seconds")
        if started_at + dt.timedelta(seconds=timeout) <= now
    )


def _time_out_one(task_id, timeout: int) -> int:
    with transaction.atomic():
        task = Task.objects.select_for_update(skip_locked=True).filter(pk=task_id, state=TaskState.RUNNING).first()
        attempt = (
            task
            and Attempt.objects.select_for_update()
            .filter(task=task, number=task.attempts_count, stop_requested_at__isnull=True)
            .first()
        )
        if attempt is None:
            return 0
        attempt_request_stop(
            task=task,
            attempt=attempt,
            reason=StopReason.TIMEOUT,
            message=f"timeout of {timeout} s reached; stopping {attempt}",
        )
        return 1


def cleanups_pending(
    limit: int = 100,
    now: dt.datetime | None = None,
    *,
    connection_id: int | None = None,
    deadline: float | None = None,
) -> int:
    """Remove what closed attempts left in their cloud (of one connection, or of all, one connection after the
    other); a failure is retried later, and past `deadline` (time.monotonic()) the rest waits for the next pass.

    A `local` attempt's run directory is removed by its agent, which says so in its sync; here only
    those it never confirmed (an agent that died, an attempt it never held) after a grace period.
    An attempt on a debug hold waits until `hold_until` (tasks/services/debug_hold.py).
    """
    now = now or timezone.now()
    pending = _cleanups_query(now)
    if connection_id is not None:
        pending = pending.filter(task__connection_id=connection_id)
    by_connection = defaultdict(list)
    for attempt_id, task_id, connection_id in pending.values_list("pk", "task_id", "task__connection_id")[:limit]:
        by_connection[connection_id].append((attempt_id, task_id))
    return sum(
        isolated(
            f"cleanup on connection {connection_id}",
            lambda rows=rows: _cleanup_batch(rows, deadline),
            task_ids=[t for _, t in rows],
        )
        for connection_id, rows in by_connection.items()
    )


def _cleanups_query(now: dt.datetime):
    retry = now - dt.timedelta(seconds=CLEANUP_RETRY_SECONDS)
    grace = now - dt.timedelta(seconds=LOCAL_CLEANUP_GRACE_SECONDS)
    agents = handed_out_kinds()  # their host agents clean up; the pass only after the grace, if they never said so
    clouds = ~Q(task__backend__in=agents) & (Q(cleanup_error="") | Q(updated_at__lt=retry))
    unconfirmed = Q(task__backend__in=agents, closed_at__lt=grace) & (Q(cleanup_error="") | Q(updated_at__lt=retry))
    return (
        Attempt.objects.filter(cleanup_state=CleanupState.PENDING)
        .filter(clouds | unconfirmed)
        .filter(Q(hold_until__isnull=True) | Q(hold_until__lte=now))
    )


def _cleanup_batch(rows: list[tuple[int, object]], deadline: float | None) -> int:
    count = 0
    for attempt_id, task_id in rows:
        count += isolated("cleanup", lambda a=attempt_id: int(attempt_cleanup(attempt_id=a)), task_ids=[task_id])
        if _past(deadline):
            break
    return count


# ---------------------------------------------------------------------------- when is the next pass due?
def reconcile_due_at(*, last_pass: dt.datetime | None, now: dt.datetime | None = None) -> dt.datetime | None:
    """When the pass next has something to do (`now` or earlier: at once), or None: nothing until a doorbell.

    A few cheap queries, so an idle ticker can ask every few seconds for nothing. Work that appears
    meanwhile rings the doorbell (dispatch.py); the deadlines the database holds (a retry's time, a
    timeout, a failed start or cleanup to retry) and the observation cadences are computed here.
    """
    now = now or timezone.now()
    last_pass = last_pass or now - dt.timedelta(days=1)
    due: list[dt.datetime] = []

    def every(seconds: float) -> None:
        due.append(last_pass + dt.timedelta(seconds=seconds))

    for _step, step_due in _PASS_STEPS.values():
        at = step_due(last_pass, now)
        if at is not None:
            due.append(at)
    agents = handed_out_kinds()
    pending = Task.objects.filter(state=TaskState.PENDING, connection__dispatch_enabled=True)
    if pending.exclude(backend__in=agents).exclude(state_reason__startswith="waiting:").exists():
        return now
    if pending.exclude(backend__in=agents).exists():
        every(WAITING_SECONDS)
    agent_work = Task.objects.filter(
        backend__in=agents, state__in=(TaskState.PENDING, TaskState.SUBMITTING, TaskState.STARTING)
    ).values("connection_id")
    if any(not local_agent_serves(c) for c in CloudConnection.objects.filter(backend__in=agents, pk__in=agent_work)):
        return now
    retry_at = Task.objects.filter(state=TaskState.RETRY_WAIT).aggregate(at=Min("next_attempt_at"))["at"]
    if retry_at is not None:
        due.append(retry_at)
    executing = set(Task.objects.filter(state__in=EXECUTING).values_list("backend", "state").distinct())
    if any(backend not in agents and state != TaskState.UNKNOWN for backend, state in executing):
        every(OBSERVE_SECONDS)
        due += _starts_due_at()
    elif any(state != TaskState.UNKNOWN for _backend, state in executing):
        every(OBSERVE_AGENT_SECONDS)
    elif executing:
        every(OBSERVE_UNKNOWN_SECONDS)
    if any(state == TaskState.RUNNING for _backend, state in executing):
        due += _timeouts_at()
    due += _cleanups_at()
    return min(due) if due else None


def _starts_due_at() -> list[dt.datetime]:
    submitting = Attempt.objects.filter(
        task__state=TaskState.SUBMITTING, external_ref="", closed_at__isnull=True
    ).exclude(task__backend__in=handed_out_kinds())
    if submitting.filter(state=AttemptState.CREATED).exists():
        return [timezone.now()]
    oldest = submitting.aggregate(at=Min("updated_at"))["at"]
    return [oldest + dt.timedelta(seconds=START_RETRY_SECONDS)] if oldest else []


def _timeouts_at() -> list[dt.datetime]:
    running = Task.objects.filter(state=TaskState.RUNNING, timeout_seconds__isnull=False, started_at__isnull=False)
    rows = running.values_list("started_at", "timeout_seconds")
    ends = [started + dt.timedelta(seconds=limit) for started, limit in rows]
    return [min(ends)] if ends else []


def _cleanups_at() -> list[dt.datetime]:
    rows = Attempt.objects.filter(cleanup_state=CleanupState.PENDING).values_list(
        "task__backend", "cleanup_error", "updated_at", "closed_at", "hold_until"
    )[:500]
    due, agents = [], handed_out_kinds()
    for backend, error, updated_at, closed_at, hold_until in rows:
        closed_at = closed_at or updated_at
        at = closed_at + dt.timedelta(seconds=LOCAL_CLEANUP_GRACE_SECONDS) if backend in agents else closed_at
        if error:
            at = max(at, updated_at + dt.timedelta(seconds=CLEANUP_RETRY_SECONDS))
        if hold_until:
            at = max(at, hold_until)
        due.append(at)
    return [min(due)] if due else []
