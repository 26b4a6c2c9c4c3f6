"""One reconcile pass: level-triggered, idempotent, safe to run twice at once, and fault-isolated.

Each step claims its rows (row locks with skip_locked on PostgreSQL; SQLite's IMMEDIATE
transactions serialize writers), so any number of workers may run passes. Each step
handles its tasks, attempts and connections one at a time through `isolated`: one bad
row or cloud is logged and written on its tasks, and the rest of the pass goes on; a step
that fails as a whole does not stop the steps after it.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from tasks.choices import CleanupState, StopReason, TaskState
from tasks.models import Attempt, Task
from tasks.services.admission import admit_all
from tasks.services.attempts import (
    attempt_cleanup,
    attempt_create,
    attempt_request_stop,
    attempt_start,
    attempt_stop_unstarted,
    current_attempt,
)
from tasks.services.faults import isolated
from tasks.services.observation import observe_all

logger = logging.getLogger(__name__)
# A SUBMITTING attempt whose start job has not recorded anything for this long is started again.
START_RETRY_SECONDS = 5


def reconcile_pass() -> dict[str, int]:
    """Run every step once; return what each did (for logs and the django-q2 result)."""
    steps = {
        "admitted": admit_all,
        "retried": retries_due,
        "cancelled": cancels_unstarted,
        "restarted": starts_stalled,
        "timed_out": timeouts_due,
        "observed": observe_all,
        "cleaned": cleanups_pending,
    }
    done = {name: isolated(name, step) for name, step in steps.items()}
    return {key: value for key, value in done.items() if value}


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
        attempt_create(task=task, reason=f"retry {task.failed_attempts} of {task.retry_limit}")
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


def starts_stalled() -> int:
    """Start jobs lost with a crashed worker: ensure_started is idempotent, so asking again is safe."""
    cutoff = timezone.now() - dt.timedelta(seconds=START_RETRY_SECONDS)
    stalled = Attempt.objects.filter(
        task__state=TaskState.SUBMITTING, external_ref="", closed_at__isnull=True, updated_at__lt=cutoff
    ).values_list("pk", "task_id")
    count = 0
    for attempt_id, task_id in stalled:
        Attempt.objects.filter(pk=attempt_id).update(updated_at=timezone.now())
        count += isolated("start", lambda attempt_id=attempt_id: _start(attempt_id), task_ids=[task_id])
    return count


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


def cleanups_pending(limit: int = 100) -> int:
    """Remove what closed attempts left in their cloud; retried every pass until done."""
    pending = Attempt.objects.filter(cleanup_state=CleanupState.PENDING).values_list("pk", "task_id")[:limit]
    return sum(
        isolated("cleanup", lambda attempt_id=attempt_id: int(attempt_cleanup(attempt_id=attempt_id)), task_ids=[tid])
        for attempt_id, tid in pending
    )
