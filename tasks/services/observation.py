"""Observation: what each cloud says about the open attempts, and what the reconciler does about it.

One batched observation per connection. For Runner backends the Runner's reports are the
truth and the cloud's view only covers a silent Runner; without a Runner the cloud's
observation is the truth.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.backends import get_backend
from clusters.backends.base import BackendError, Observation
from clusters.models import CloudConnection
from tasks.choices import EXECUTING, AttemptState, TaskState
from tasks.models import Attempt, Task
from tasks.services.attempts import attempt_close, attempt_ref, executing_attempts, stopped_state
from tasks.services.faults import isolated
from tasks.services.lifecycle import attempt_transition, event_append, lock_task_and_attempt, task_transition
from tasks.services.logs import log_copy_from_cloud
from tasks.stop_grace import stop_window_seconds

logger = logging.getLogger(__name__)


def observe_all(*, connection_id: int | None = None) -> int:
    """Observe every connection with open attempts (or only this one); one connection's or attempt's error does
    not stop the others."""
    connections = CloudConnection.objects.filter(tasks__state__in=EXECUTING)
    if connection_id is not None:
        connections = connections.filter(pk=connection_id)
    count = 0
    for connection in connections.distinct():
        attempts = executing_attempts(connection)
        if attempts:
            count += isolated(
                f"observing {connection.cloud_id}",
                lambda connection=connection, attempts=attempts: connection_observe(connection, attempts),
                task_ids=[attempt.task_id for attempt in attempts],
            )
    return count


def connection_observe(connection: CloudConnection, attempts: list[Attempt]) -> int:
    """One batched observation of the connection's open attempts; act on what contradicts the database."""
    backend = get_backend(connection)
    observations = backend.observe([attempt_ref(a) for a in attempts])
    act = _act_on_runner_attempt if backend.uses_runner else _act_on_cloud_attempt
    return sum(
        isolated(
            f"acting on {attempt}",
            lambda attempt=attempt, observation=observation: (
                _note_booted(attempt, observation) + act(backend, attempt, observation)
            ),
            task_ids=[attempt.task_id],
        )
        for attempt, observation in zip(attempts, observations, strict=True)
    )


def _note_booted(attempt: Attempt, observation: Observation) -> int:
    """Record once when the cloud placed the execution (pod scheduled, server ACTIVE): a phase of the attempt's
    start-up (docs/portal.md, "Where the start-up time went"). Write-once, so no lock is needed."""
    if attempt.booted_at is not None:
        return 0
    text = observation.evidence.get("scheduled_at") or observation.evidence.get("active_since")
    when = parse_datetime(str(text)) if text else None
    if when is None:
        return 0
    attempt.booted_at = when
    Attempt.objects.filter(pk=attempt.pk, booted_at__isnull=True).update(booted_at=when)
    return 0


def _act_on_runner_attempt(backend: Any, attempt: Attempt, observation: Observation) -> int:
    """For Runner backends the Runner's reports are the truth; the cloud's view only covers a Runner gone silent.

    1. A stop the Runner did not carry out within the stop window, or one no Runner is there to
       carry out (its execution is gone, and no restarted Runner could report it): the backend kills what
       is left, and the next pass ends it.
    2. Silence past the heartbeat deadline (a dead, hung or cut-off Runner): UNKNOWN, never a re-run.
    3. A Runner process that died on a host we control: start a new one, which re-attaches to the
       program or reports it lost.
    """
    now = timezone.now()
    # A host agent between two runs (a restart): the program runs on and its output waits on the host. The
    # agent started again below carries out the stop and reports the last bytes; the stop window still bounds it.
    reportable = observation.evidence.get("state_on_host", False)
    nobody_to_stop = (
        observation.phase == "gone" and attempt.stop_requested_at and not attempt.stop_escalated_at and not reportable
    )
    if nobody_to_stop or _stop_window_passed(attempt, now):
        return _escalate_stop(backend, attempt, now)
    if observation.phase == "gone" and attempt.stop_requested_at and attempt.stop_escalated_at:
        return _finish(attempt, "stopped by force: the Runner did not stop the program in time, or was gone")
    if not attempt.stop_requested_at:
        verdict = _cloud_verdict(backend, attempt, observation)
        if verdict:
            return verdict
        waiting = backend.runner_boot_wait(
            attempt_ref(attempt), observation, runner_contact_at=attempt.runner_contact_at
        )
        if waiting:
            return _note_waiting(attempt, waiting, observation)
    last_sign = attempt.last_heartbeat_at or attempt.runner_contact_at or attempt.cloud_created_at or attempt.created_at
    silent_for = (now - last_sign).total_seconds()
    if silent_for > settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS and attempt.task.state != TaskState.UNKNOWN:
        state = "is not running" if observation.phase == "gone" else "still runs but does not report"
        return _suspect(attempt, f"no word from the Runner for {int(silent_for)} s; it {state}", observation)
    if observation.phase == "gone" and silent_for > 3 * settings.RUNNER_HEARTBEAT_SECONDS:
        return _relaunch(backend, attempt, now)
    return 0


def _note_waiting(attempt: Attempt, why: str, observation: Observation) -> int:
    """A machine still booting before its Runner is due: the task stays STARTING with the reason, said once."""
    if attempt.observed_reason == why:
        return 0
    with transaction.atomic():
        task, locked = lock_task_and_attempt(attempt)
        if locked.is_closed or task.state != TaskState.STARTING:
            return 0
        locked.observed_phase, locked.observed_reason = observation.phase, why
        locked.save(update_fields=["observed_phase", "observed_reason", "updated_at"])
        Task.objects.filter(pk=task.pk).update(state_reason=why)
        event_append(
            task=task,
            type="observed",
            message=why,
            data={"attempt": locked.number, "phase": observation.phase, **observation.evidence},
        )
    return 1


def relaunch_limit() -> int:
    """How often a gone Runner (or host agent) is started again for one attempt: RUNNER_RELAUNCH_LIMIT, 3."""
    return max(0, int(getattr(settings, "RUNNER_RELAUNCH_LIMIT", 3)))


def _relaunch(backend: Any, attempt: Attempt, now: dt.datetime) -> int:
    """Start the Runner of an attempt whose execution is gone again, a bounded number of times.

    Each relaunch is an event on the task ("started again, 2 of 3"), and the next one waits as long
    after it as the first waited after the last sign of life. A Runner that cannot stay up (a broken
    state directory, a host that kills it) would otherwise be started every pass for ever: once the
    limit is spent and the task is UNKNOWN (silent past the heartbeat deadline), what is left of the
    program is stopped and the attempt ends FAILED with the reason.
    """
    earlier = list(
        attempt.task.events.filter(type="runner_relaunched", data__attempt=attempt.number)
        .order_by("-seq")
        .values_list("created_at", flat=True)
    )
    limit = relaunch_limit()
    if len(earlier) >= limit:
        if attempt.task.state != TaskState.UNKNOWN:
            return 0  # the heartbeat deadline makes it UNKNOWN first: a Runner may still come back
        try:
            backend.stop(attempt_ref(attempt))  # never leave a program running that nobody reports on
        except BackendError as exc:
            logger.warning("stopping %s before giving up failed: %s", attempt, exc.message)
        why = (
            f"the execution is gone and its Runner, started again {len(earlier)} times, never stayed up; "
            "giving up on this attempt"
        )
        failed = Observation(attempt.external_name, exists=False, phase="failed", reason=why)
        return _finish(attempt, why, observation=failed)
    if earlier and (now - earlier[0]).total_seconds() <= 3 * settings.RUNNER_HEARTBEAT_SECONDS:
        return 0
    backend.ensure_started(attempt_ref(attempt))
    with transaction.atomic():
        task, locked = lock_task_and_attempt(attempt)
        if not locked.is_closed:
            event_append(
                task=task,
                type="runner_relaunched",
                message=f"the Runner was not running; started it again ({len(earlier) + 1} of {limit})",
                data={"attempt": locked.number},
            )
    return 1


def _cloud_verdict(backend: Any, attempt: Attempt, observation: Observation) -> int:
    """Cloud facts about a Runner backend's machine that need not wait for the heartbeat deadline.

    - The machine broke (ERROR) before its Runner ever spoke: the program never ran, FAILED
      (the retry policy applies).
    - It broke or vanished after contact: the program may have run, UNKNOWN with the evidence.
    - Its host is down (interrupted): the attempt ends `interrupted`, the task's on_interrupt decides.
    - It is up but its Runner never reported by the boot deadline: FAILED, with the console
      tail as an event so the user sees why.
    """
    status = observation.evidence.get("server_status")
    if observation.interrupted:  # the machine's host is gone: not the program's failure, whatever it had done
        return _finish(attempt, observation.reason, observation=observation)
    if observation.phase == "failed" and attempt.runner_contact_at is None:
        return _finish(attempt, observation.reason, observation=observation)
    if status in ("ERROR", "absent"):
        return _finish(attempt, observation.reason, evidence=observation)
    verdict = backend.runner_never_reported(
        attempt_ref(attempt), observation, runner_contact_at=attempt.runner_contact_at
    )
    if not verdict:
        return 0
    with transaction.atomic():
        task, locked = lock_task_and_attempt(attempt)
        if not locked.is_closed and verdict["console_tail"]:
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
        log_copy_from_cloud(backend, attempt, attempt_ref(attempt))
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
            if attempt.state != AttemptState.RUNNING:
                attempt.program_started_at = now
                attempt_transition(attempt=attempt, to=AttemptState.RUNNING, fields=[*fields, "program_started_at"])
                fields = []
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
        and now - attempt.stop_requested_at > dt.timedelta(seconds=stop_window_seconds(attempt.task.normalized))
    )


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
                attempt.failure_reason = why  # the cloud's deadline, in words (for the retry suggestion)
            elif observation.phase == "succeeded":
                outcome = TaskState.SUCCEEDED
            else:
                outcome = TaskState.FAILED
                attempt.failure_reason = why
        else:
            attempt.failure_reason = why
            details = {"evidence": why, **(evidence.evidence if evidence else {})}
            attempt_close(
                task=task,
                attempt=attempt,
                outcome=TaskState.UNKNOWN,
                reason=f"{why}; retry it if it is safe to run again",
                data=details,
                lost=True,
            )
            return 1
        # Where it ran, and the image digest the cloud saw run (the attempt's provenance: results/provenance.py).
        seen = observation.evidence if observation else {}
        where = {key: seen[key] for key in ("pod", "node", "image_id") if seen.get(key)} or None
        attempt_close(
            task=task,
            attempt=attempt,
            outcome=outcome,
            reason=why or outcome.lower(),
            data=where,
            interrupted=bool(observation and observation.interrupted and outcome == TaskState.FAILED),
        )
    return 1
