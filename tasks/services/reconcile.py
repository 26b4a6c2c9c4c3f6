"""One reconcile pass: level-triggered, idempotent, safe to run twice at once.

Each step claims its rows (row locks with skip_locked on PostgreSQL; SQLite's IMMEDIATE
transactions serialize writers), so any number of workers may run passes.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.backends import get_backend
from clusters.backends.base import BackendError, Observation
from clusters.models import CloudConnection
from tasks.choices import EXECUTING, AttemptState, CleanupState, StopReason, TaskState
from tasks.models import Attempt, Task
from tasks.services.execution import (
    admit_all,
    attempt_close,
    attempt_create,
    attempt_ref,
    attempt_request_stop,
    attempt_start,
    executing_attempts,
    lock_task_and_attempt,
    stopped_state,
)
from tasks.services.lifecycle import event_append, task_transition
from tasks.services.logs import log_append_copied

logger = logging.getLogger(__name__)
# A SUBMITTING attempt whose start job has not recorded anything for this long is started again.
START_RETRY_SECONDS = 5


def reconcile_pass() -> dict[str, int]:
    """Run every step once; return what each did (for logs and the django-q2 result)."""
    done = {
        "admitted": admit_all(),
        "retried": retries_due(),
        "restarted": starts_stalled(),
        "timed_out": timeouts_due(),
        "observed": observe_all(),
        "cleaned": cleanups_pending(),
    }
    return {key: value for key, value in done.items() if value}


def retries_due(now: dt.datetime | None = None) -> int:
    """RETRY_WAIT tasks whose persisted backoff has passed get their next Attempt."""
    now = now or timezone.now()
    count = 0
    for task_id in Task.objects.filter(state=TaskState.RETRY_WAIT, next_attempt_at__lte=now).values_list(
        "pk", flat=True
    ):
        with transaction.atomic():
            task = (
                Task.objects.select_for_update(skip_locked=True).filter(pk=task_id, state=TaskState.RETRY_WAIT).first()
            )
            if task is not None:
                attempt_create(task=task, reason=f"retry {task.failed_attempts} of {task.retry_limit}")
                count += 1
    return count


def starts_stalled() -> int:
    """Start jobs lost with a crashed worker: ensure_started is idempotent, so asking again is safe."""
    cutoff = timezone.now() - dt.timedelta(seconds=START_RETRY_SECONDS)
    stalled = Attempt.objects.filter(
        task__state=TaskState.SUBMITTING, external_ref="", closed_at__isnull=True, updated_at__lt=cutoff
    ).values_list("pk", flat=True)
    for attempt_id in stalled:
        Attempt.objects.filter(pk=attempt_id).update(updated_at=timezone.now())
        attempt_start(attempt_id=attempt_id)
    return len(stalled)


def timeouts_due(now: dt.datetime | None = None) -> int:
    """Running tasks past their total wall time are stopped; the Runner's report then ends them TIMED_OUT."""
    now = now or timezone.now()
    count = 0
    candidates = Task.objects.filter(state=TaskState.RUNNING, timeout_seconds__isnull=False, started_at__isnull=False)
    for task_id, started_at, timeout in candidates.values_list("pk", "started_at", "timeout_seconds"):
        if started_at + dt.timedelta(seconds=timeout) > now:
            continue
        with transaction.atomic():
            task = Task.objects.select_for_update(skip_locked=True).filter(pk=task_id, state=TaskState.RUNNING).first()
            attempt = (
                task
                and Attempt.objects.select_for_update()
                .filter(task=task, number=task.attempts_count, stop_requested_at__isnull=True)
                .first()
            )
            if attempt is not None:
                attempt_request_stop(
                    task=task,
                    attempt=attempt,
                    reason=StopReason.TIMEOUT,
                    message=f"timeout of {timeout} s reached; stopping {attempt}",
                )
                count += 1
    return count


def observe_all() -> int:
    """One batched observation per connection; act on what contradicts the database."""
    count = 0
    for connection in CloudConnection.objects.filter(tasks__state__in=EXECUTING).distinct():
        attempts = executing_attempts(connection)
        if not attempts:
            continue
        backend = get_backend(connection)
        try:
            observations = backend.observe([attempt_ref(a) for a in attempts])
        except BackendError as exc:
            logger.warning("observing %s failed: %s", connection.cloud_id, exc.message)
            continue
        act = _act_on_runner_attempt if backend.uses_runner else _act_on_cloud_attempt
        for attempt, observation in zip(attempts, observations, strict=True):
            count += act(backend, attempt, observation)
    return count


def _act_on_runner_attempt(backend: Any, attempt: Attempt, observation: Observation) -> int:
    """For Runner backends the Runner's reports are the truth; the cloud's view only covers a Runner gone silent.

    1. A stop the Runner did not carry out within the stop window: the backend kills the execution.
    2. Silence past the heartbeat deadline (a dead, hung or cut-off Runner): UNKNOWN, never a re-run.
    3. A Runner process that died on a host we control: start a new one, which re-attaches to the
       program or reports it lost.
    """
    now = timezone.now()
    if _stop_window_passed(attempt, now):
        return _escalate_stop(backend, attempt, now)
    if observation.phase == "gone" and attempt.stop_requested_at and attempt.stop_escalated_at:
        return _finish(attempt, "stopped by force after the Runner did not stop the program in time")
    if not attempt.stop_requested_at:
        verdict = _cloud_verdict(backend, attempt, observation)
        if verdict:
            return verdict
    last_sign = attempt.last_heartbeat_at or attempt.runner_contact_at or attempt.cloud_created_at or attempt.created_at
    silent_for = (now - last_sign).total_seconds()
    if silent_for > settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS and attempt.task.state != TaskState.UNKNOWN:
        state = "is not running" if observation.phase == "gone" else "still runs but does not report"
        return _suspect(attempt, f"no word from the Runner for {int(silent_for)} s; it {state}", observation)
    if observation.phase == "gone" and silent_for > 3 * settings.RUNNER_HEARTBEAT_SECONDS:
        backend.ensure_started(attempt_ref(attempt))
        return 1
    return 0


def _cloud_verdict(backend: Any, attempt: Attempt, observation: Observation) -> int:
    """Cloud facts about a Runner backend's machine that need not wait for the heartbeat deadline.

    - The machine broke (ERROR) before its Runner ever spoke: the program never ran, FAILED
      (the retry policy applies).
    - It broke or vanished after contact: the program may have run, UNKNOWN with the evidence.
    - It is up but its Runner never reported by the boot deadline: FAILED, with the console
      tail as an event so the user sees why.
    """
    status = observation.evidence.get("server_status")
    if observation.phase == "failed" and attempt.runner_contact_at is None:
        return _finish(attempt, observation.reason, observation=observation)
    if status in ("ERROR", "absent"):
        return _finish(attempt, observation.reason, evidence=observation)
    never_reported = getattr(backend, "runner_never_reported", None)
    verdict = never_reported and never_reported(
        attempt_ref(attempt), observation, runner_contact_at=attempt.runner_contact_at
    )
    if not verdict:
        return 0
    with transaction.atomic():
        task, locked = lock_task_and_attempt(attempt)
        if not locked.is_closed:
            event_append(
                task=task,
                type="console",
                message="console log tail of the server",
                data={"attempt": locked.number, "tail": verdict["console_tail"][-8000:]},
            )
    failed = Observation(observation.external_name, exists=True, phase="failed", reason=verdict["reason"])
    return _finish(attempt, verdict["reason"], observation=failed)


def _act_on_cloud_attempt(backend: Any, attempt: Attempt, observation: Observation) -> int:
    """Without a Runner the cloud's observation is the truth: copy new log bytes, then follow its phase."""
    now = timezone.now()
    if _stop_window_passed(attempt, now):
        _escalate_stop(backend, attempt, now)
    if observation.phase in ("running", "succeeded", "failed"):
        copy_cloud_logs(backend, attempt)
    if observation.phase == "gone":
        if attempt.stop_requested_at:
            return _finish(attempt, f"stopped ({observation.reason or 'the execution was removed'})")
        return _finish(
            attempt, f"{observation.reason or 'the execution vanished from the cloud'}", evidence=observation
        )
    if observation.phase in ("succeeded", "failed"):
        return _finish(attempt, observation.reason, observation=observation)
    changed = (observation.phase, observation.reason) != (attempt.observed_phase, attempt.observed_reason)
    if not changed:
        return 0
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        if attempt.is_closed:
            return 0
        attempt.observed_phase, attempt.observed_reason = observation.phase, observation.reason
        fields = ["observed_phase", "observed_reason", "updated_at"]
        if observation.phase == "running" and task.state in (
            TaskState.SUBMITTING,
            TaskState.STARTING,
            TaskState.UNKNOWN,
        ):
            attempt.state, attempt.program_started_at = AttemptState.RUNNING, now
            fields += ["state", "program_started_at"]
            task_transition(
                task=task,
                to=TaskState.RUNNING,
                reason=observation.reason or "the program is running",
                data={"attempt": attempt.number},
            )
        elif observation.reason:
            event_append(
                task=task,
                type="observed",
                message=observation.reason,
                data={"attempt": attempt.number, "phase": observation.phase, **observation.evidence},
            )
        attempt.save(update_fields=fields)
    return 1


def _suspect(attempt: Attempt, why: str, observation: Observation) -> int:
    """UNKNOWN, with the attempt left open: if the Runner reports again, its facts decide the state."""
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        if attempt.is_closed or task.state not in (
            TaskState.SUBMITTING,
            TaskState.STARTING,
            TaskState.RUNNING,
            TaskState.CANCELLING,
        ):
            return 0
        task_transition(
            task=task,
            to=TaskState.UNKNOWN,
            reason=f"{why}; it is not run again by itself",
            data={"attempt": attempt.number, "evidence": why, **observation.evidence},
        )
    return 1


def _escalate_stop(backend: Any, attempt: Attempt, now: dt.datetime) -> int:
    """The backend stops what the stop request did not; a cloud error is retried next pass, not fatal to it."""
    try:
        backend.stop(attempt_ref(attempt))
    except BackendError as exc:
        logger.warning("stopping %s failed, will retry: %s", attempt, exc.message)
        return 0
    Attempt.objects.filter(pk=attempt.pk).update(stop_escalated_at=now)
    return 1


def _stop_window_passed(attempt: Attempt, now: dt.datetime) -> bool:
    return bool(
        attempt.stop_requested_at
        and not attempt.stop_escalated_at
        and now - attempt.stop_requested_at > dt.timedelta(seconds=settings.STOP_WINDOW_SECONDS)
    )


def copy_cloud_logs(backend: Any, attempt: Attempt) -> None:
    """Copy what the cloud holds of the log into CloudPivot, so it outlives the pod or VM."""
    try:
        pieces, cursor = backend.fetch_logs(attempt_ref(attempt), attempt.log_cursor or {})
    except BackendError as exc:
        logger.info("log copy for %s failed: %s", attempt, exc.message)
        return
    if pieces or cursor != attempt.log_cursor:
        log_append_copied(attempt=attempt, pieces=pieces, cursor=cursor)
        attempt.log_cursor = cursor


def _finish(
    attempt: Attempt, why: str, *, observation: Observation | None = None, evidence: Observation | None = None
) -> int:
    """Close an open attempt with the outcome the facts show."""
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        if attempt.is_closed:
            return 0
        if attempt.stop_requested_at:
            outcome = stopped_state(attempt)
        elif observation is not None:
            attempt.exit_code = observation.exit_code
            if observation.timed_out:
                outcome = TaskState.TIMED_OUT
            elif observation.phase == "succeeded":
                outcome = TaskState.SUCCEEDED
            else:
                outcome = TaskState.FAILED
                attempt.failure_reason = why
        else:
            attempt.failure_reason = why
            attempt.state = AttemptState.LOST
            details = {"evidence": why, **(evidence.evidence if evidence else {})}
            attempt_close(
                task=task,
                attempt=attempt,
                outcome=TaskState.UNKNOWN,
                reason=f"{why}; retry it if it is safe to run again",
                data=details,
            )
            return 1
        attempt_close(task=task, attempt=attempt, outcome=outcome, reason=why or outcome.lower())
    return 1


def cleanups_pending(limit: int = 100) -> int:
    """Remove what closed attempts left in their cloud; retried every pass until done."""
    count = 0
    pending = Attempt.objects.select_related("task__connection").filter(cleanup_state=CleanupState.PENDING)[:limit]
    for attempt in pending:
        if attempt_cleanup(attempt):
            count += 1
    return count


def attempt_cleanup(attempt: Attempt) -> bool:
    try:
        done = get_backend(attempt.task.connection).cleanup(attempt_ref(attempt))
    except BackendError as exc:
        Attempt.objects.filter(pk=attempt.pk).update(cleanup_error=exc.message)
        return False
    if done:
        Attempt.objects.filter(pk=attempt.pk).update(cleanup_state=CleanupState.DONE, cleanup_error="")
    return done
