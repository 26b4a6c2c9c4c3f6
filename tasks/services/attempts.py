"""One execution of a task: create it, start it in its cloud, ask it to stop, close it, clean up after it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cloudpivot import credentials
from cloudpivot.crash_points import crash_point
from cloudpivot.exceptions import ApplicationError
from cloudpivot.rows import objects_insert
from clusters.backends import backend_hands_out, backend_uses_runner, get_backend
from clusters.backends.base import AttemptRef, BackendError
from clusters.models import CloudConnection
from runner_api.bootstrap import bootstrap_secret_issue
from tasks import dispatch
from tasks.choices import EXECUTING, AttemptState, CleanupState, StopReason, TaskState, retry_backoff_seconds
from tasks.models import Attempt, Task
from tasks.services.debug_hold import debug_hold_begin, debug_hold_ended
from tasks.services.interruption import after_interruption
from tasks.services.lifecycle import (
    Transitions,
    attempt_transition,
    event_append,
    lock_task_and_attempt,
    on_commit_once,
    task_transition,
)
from tasks.services.logs import log_copy_from_cloud
from tasks.services.secret_delivery import task_secret_refs, task_secrets
from tasks.services.start_claim import start_claim_held
from tasks.services.storage_record import storage_begin, storage_end

logger = logging.getLogger(__name__)
# Attempt.number and Task.attempts_count are smallints: attempt 32,768 cannot be stored anywhere.
MAX_ATTEMPTS = 32767


class AttemptLimitReached(ApplicationError):
    code = "attempt_limit_reached"
    status = 409


def attempt_external_name(task: Task, number: int) -> str:
    """The name the cloud knows the attempt by: the task's full id, so no two tasks ever share one."""
    return f"cp-{task.id.hex}-{number}"


def attempt_ref(attempt: Attempt) -> AttemptRef:
    return AttemptRef(
        task_id=str(attempt.task_id),
        attempt_id=attempt.pk,
        number=attempt.number,
        external_name=attempt.external_name,
        external_ref=attempt.external_ref,
        spec=attempt.task.normalized,
        runner_credential=credentials.runner_credential(
            external_name=attempt.external_name, nonce=attempt.credential_nonce
        ),
        stop_requested=attempt.stop_requested_at is not None,
    )


def attempt_start_ref(backend: Any, attempt: Attempt) -> AttemptRef:
    """attempt_ref plus the one-time bootstrap secret, issued (and recorded) here for a backend that needs one,
    and the project secrets a backend without a Runner delivers itself (a Runner's come in its assignment)."""
    ref = attempt_ref(attempt)
    if not backend.uses_runner and task_secret_refs(attempt.task):
        values, error = task_secrets(attempt.task)
        if error:
            raise BackendError(error, kind="invalid_spec")
        ref = dataclasses.replace(ref, secrets=values)
    if not backend.needs_bootstrap_secret:
        return ref
    secret = bootstrap_secret_issue(attempt_id=attempt.pk, runner_credential=ref.runner_credential)
    return dataclasses.replace(ref, bootstrap_secret=secret)


def current_attempt(task: Task) -> Attempt | None:
    """The locked task's latest attempt, locked too."""
    if not task.attempts_count:
        return None
    return Attempt.objects.select_for_update().filter(task=task, number=task.attempts_count).first()


def executing_attempts(connection: CloudConnection) -> list[Attempt]:
    """Open attempts of tasks that may be executing on this connection."""
    return list(
        Attempt.objects.select_related("task")
        .filter(task__connection=connection, task__state__in=EXECUTING, closed_at__isnull=True)
        .exclude(external_ref="")
    )


# ---------------------------------------------------------------------------- create and start
def attempt_create(*, task: Task, reason: str, announce: bool = True) -> Attempt:
    """Commit the intent (the next Attempt and its external name) and move the locked task to SUBMITTING.

    Who starts it is woken after commit: the host agent of a `local` connection (which takes it in its
    next sync), else the reconcile pass (which starts every SUBMITTING attempt). `announce=False` when
    the caller is that agent's own sync, which hands the attempt out in the same transaction.
    """
    transitions = Transitions()
    attempt = attempt_intent(task=task, reason=reason, transitions=transitions)
    objects_insert(Attempt, [attempt])
    transitions.write()
    attempts_announce(task, announce=announce)
    return attempt


def attempt_intent(*, task: Task, reason: str, transitions: Transitions) -> Attempt:
    """attempt_create in memory, for many tasks at once (admission): the next Attempt of the locked task, not
    inserted yet, and the task's move to SUBMITTING added to `transitions`. The caller inserts the attempts
    (objects_insert), then writes the transitions, then calls attempts_announce."""
    number = task.attempts_count + 1
    if number > MAX_ATTEMPTS:
        raise AttemptLimitReached(f"the task has had {task.attempts_count} attempts, the most one task can have")
    name = attempt_external_name(task, number)
    nonce = credentials.new_nonce()
    attempt = Attempt(
        task=task,
        number=number,
        external_name=name,
        credential_nonce=nonce,
        runner_token_hash=credentials.runner_credential_hash(external_name=name, nonce=nonce),
        admitted_at=timezone.now(),
    )
    transitions.add(
        task=task,
        to=TaskState.SUBMITTING,
        reason=f"{reason}: attempt {number} ({name})",
        data={"attempt": number},
        also={"attempts_count": number, "next_attempt_at": None},
    )
    return attempt


def attempts_announce(task: Task, *, announce: bool = True) -> None:
    """Wake who starts the new attempts of the task's connection, after commit (once per transaction will do)."""
    if not backend_hands_out(task.backend):
        on_commit_once(dispatch.wake_reconciler)
    elif announce:
        _ring_host_agents(task)


def attempt_start(*, attempt_id: int) -> str:
    """Ask the cloud for the attempt's execution (idempotent), then record what it answered.

    A cancel may close the attempt while the cloud is being asked; what the cloud made then
    is recorded all the same and stopped and removed at once.
    """
    attempt = Attempt.objects.select_related("task__connection").get(pk=attempt_id)
    task = attempt.task
    if task.state != TaskState.SUBMITTING or attempt.number != task.attempts_count or attempt.is_closed:
        return f"{attempt}: nothing to start ({task.state})"
    try:
        backend = get_backend(task.connection)
        with start_claim_held(attempt.pk):  # a slow cloud is not a dead worker: no other pass claims it meanwhile
            ref = backend.ensure_started(attempt_start_ref(backend, attempt))
    except BackendError as exc:
        return _start_failed(attempt, exc)
    except Exception as exc:  # a backend bug or an unmapped cloud error: a start error like any other
        logger.exception("starting %s failed", attempt)
        return _start_failed(attempt, BackendError(f"{type(exc).__name__}: {str(exc)[:500]}"))
    crash_point("start.created")  # the next start adopts the object by its name (ensure_started)
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        if not attempt.external_ref:
            attempt.external_ref = ref.ref
            attempt.cloud_created_at = timezone.now()
            attempt.start_error = ""
            recorded = ["external_ref", "cloud_created_at", "start_error"]
            if attempt.state == AttemptState.CREATED:
                attempt_transition(attempt=attempt, to=AttemptState.STARTING, fields=recorded)
            else:  # claimed STARTING already, or reported RUNNING by its Runner before the start was recorded
                attempt.save(update_fields=[*recorded, "updated_at"])
            crash_point("start.recorded")  # one transaction with the STARTING event: neither is kept
        if attempt.is_closed:
            _remove_late_start(attempt)
            return f"{attempt}: closed while it started; stopping it"
        storage_begin(attempt)  # the references it borrows or creates (docs/data.md), recorded once
        if task.state == TaskState.SUBMITTING and attempt.number == task.attempts_count:
            verb = "adopted" if ref.adopted else "created"
            task_transition(
                task=task,
                to=TaskState.STARTING,
                reason=f"{verb} {attempt.external_name}",
                data={"attempt": attempt.number, "external_ref": ref.ref},
            )
    return f"{attempt}: started"


def _remove_late_start(attempt: Attempt) -> None:
    """What a start made for an attempt closed meanwhile is stopped and cleaned up (again, if cleanup ran first)."""
    Attempt.objects.filter(pk=attempt.pk).update(cleanup_state=CleanupState.PENDING, cleanup_error="")
    attempt_id = attempt.pk
    transaction.on_commit(lambda: dispatch.enqueue_stop(attempt_id))
    transaction.on_commit(dispatch.wake_reconciler)  # the pass cleans up


def _start_failed(attempt: Attempt, exc: BackendError) -> str:
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        if attempt.is_closed:
            return f"{attempt}: closed while it started"
        if exc.permanent and task.state == TaskState.SUBMITTING:
            attempt.failure_reason = exc.message
            attempt_close(
                task=task,
                attempt=attempt,
                outcome=TaskState.FAILED,
                reason=f"the cloud refused the task ({exc.kind}): {exc.message}",
            )
        else:
            attempt.start_error = exc.message
            attempt.save(update_fields=["start_error", "updated_at"])
            event_append(
                task=task,
                type="start_error",
                message=f"start failed, will retry: {exc.message}",
                data={"attempt": attempt.number, "kind": exc.kind},
            )
    return f"{attempt}: start failed: {exc.message}"


# ---------------------------------------------------------------------------- stop
def stopped_state(attempt: Attempt) -> str:
    return TaskState.TIMED_OUT if attempt.stop_reason == StopReason.TIMEOUT else TaskState.CANCELLED


def attempt_request_stop(*, task: Task, attempt: Attempt, reason: str, message: str) -> None:
    """Record the stop intent on a locked attempt.

    A Runner sees it at its next heartbeat (and the backend steps in after the stop window);
    without a Runner the backend is asked to stop at once.
    """
    if attempt.stop_requested_at is None:
        attempt.stop_requested_at = timezone.now()
        attempt.stop_reason = reason
        attempt.save(update_fields=["stop_requested_at", "stop_reason", "updated_at"])
        event_append(task=task, type="stop_requested", message=message, data={"attempt": attempt.number})
        if attempt.external_ref and not backend_uses_runner(task.backend):
            attempt_id = attempt.pk
            transaction.on_commit(lambda: dispatch.enqueue_stop(attempt_id))
        _ring_host_agents(task)


def _ring_host_agents(task: Task) -> None:
    """A host agent hears at once of a new attempt or a stop request (docs/runner.md, "The host agent")."""
    if backend_hands_out(task.backend):
        connection_id = task.connection_id
        transaction.on_commit(lambda: dispatch.wake_agent(connection_id))


def attempt_stop_unstarted(*, task: Task, attempt: Attempt | None, now: dt.datetime | None = None) -> bool:
    """End a locked CANCELLING task whose attempt never reached its cloud (or is already closed); True if it did.

    Nothing runs that the cloud could report on, so waiting would be for ever. A Runner that
    already reported (its start not recorded yet) is given the stop window to stop the program
    and say so; after that, or if it never reported, the attempt is closed here. Should a start
    job still be asking the cloud, it finds the attempt closed and removes what it made; a Runner
    that reports to a closed attempt is told so and stops its program.
    """
    if task.state != TaskState.CANCELLING:
        return False
    if attempt is not None and not attempt.is_closed:
        if attempt.external_ref:
            return False
        now = now or timezone.now()
        runner_may_stop_it = attempt.runner_contact_at is not None and (
            attempt.stop_requested_at is None
            or now - attempt.stop_requested_at < dt.timedelta(seconds=settings.STOP_WINDOW_SECONDS)
        )
        if runner_may_stop_it:
            return False
        attempt_close(task=task, attempt=attempt, outcome=stopped_state(attempt), reason="cancelled before it started")
        return True
    task_transition(task=task, to=TaskState.CANCELLED, reason="cancelled; nothing of it runs any more")
    return True


def attempt_stop_now(*, attempt_id: int) -> str:
    """The backend stops the execution at once (no Runner to ask, or a start that came too late)."""
    attempt = Attempt.objects.select_related("task__connection").get(pk=attempt_id)
    backend = get_backend(attempt.task.connection)
    if not backend.uses_runner:
        # What the cloud holds of the log goes with the object.
        log_copy_from_cloud(backend, attempt, attempt_ref(attempt))
    backend.stop(attempt_ref(attempt))
    return "stopped"


# ---------------------------------------------------------------------------- close and clean up
def attempt_close(
    *,
    task: Task,
    attempt: Attempt,
    outcome: str,
    reason: str,
    data: dict[str, Any] | None = None,
    lost: bool = False,
    interrupted: bool = False,
) -> None:
    """Close a locked attempt and move its locked task to `outcome` (or to RETRY_WAIT when retries are left).

    `lost`: nobody can tell how the execution ended (the attempt ends LOST, not FINISHED). `interrupted`: the
    infrastructure ended it (the attempt ends INTERRUPTED): a FAILED outcome then follows the task's
    `on_interrupt` (tasks/services/interruption.py), never its retry_limit."""
    now = timezone.now()
    ended = AttemptState.LOST if lost else AttemptState.INTERRUPTED if interrupted else AttemptState.FINISHED
    attempt.closed_at = now
    attempt.finished_at = attempt.finished_at or now
    attempt.cleanup_state = _cleanup_needed(task, attempt)
    if ended == AttemptState.FINISHED:  # a lost or interrupted execution left nothing to get into
        debug_hold_begin(task=task, attempt=attempt, outcome=outcome, now=now, data=data)
    attempt_transition(attempt=attempt, to=ended)
    storage_end(attempt, task)  # what it borrowed is released, what it created kept or left for removal
    task.exit_code = attempt.exit_code
    changed: dict[str, Any] = {"exit_code": attempt.exit_code}  # written with the transition: one UPDATE
    extra = {"attempt": attempt.number, "exit_code": attempt.exit_code, **(data or {})}
    if interrupted and outcome == TaskState.FAILED:
        _interrupted(task, attempt, reason, extra, changed, now)
        return
    if outcome == TaskState.FAILED:
        task.failed_attempts += 1
        changed["failed_attempts"] = task.failed_attempts
        if task.failed_attempts <= task.retry_limit:
            delay = retry_backoff_seconds(task.failed_attempts)
            task.next_attempt_at = now + dt.timedelta(seconds=delay)
            changed["next_attempt_at"] = task.next_attempt_at
            retries_left = task.retry_limit - task.failed_attempts
            task_transition(
                task=task,
                to=TaskState.RETRY_WAIT,
                reason=f"{reason}; retrying in {delay} s ({retries_left} more retries allowed after that)"
                if retries_left
                else f"{reason}; retrying in {delay} s (last retry)",
                data=extra | {"retry_in_seconds": delay},
                also=changed,
            )
            _enqueue_cleanup(task, attempt)
            return
    if task.state != outcome:
        task_transition(task=task, to=outcome, reason=reason, data=extra, also=changed)
    else:
        Task.objects.filter(pk=task.pk).update(**changed)
    _enqueue_cleanup(task, attempt)


def _interrupted(task: Task, attempt: Attempt, reason: str, extra: dict, changed: dict, now: dt.datetime) -> None:
    after = after_interruption(task)
    changed["interruptions"] = task.interruptions
    extra = extra | {"interrupted": True, "interruptions": task.interruptions}
    if after.requeue_in is None:
        task_transition(task=task, to=TaskState.FAILED, reason=f"{reason}; {after.words}", data=extra, also=changed)
    else:
        task.next_attempt_at = changed["next_attempt_at"] = now + dt.timedelta(seconds=after.requeue_in)
        extra["retry_in_seconds"] = after.requeue_in
        task_transition(task=task, to=TaskState.RETRY_WAIT, reason=f"{reason}; {after.words}", data=extra, also=changed)
    _enqueue_cleanup(task, attempt)


def _cleanup_needed(task: Task, attempt: Attempt) -> str:
    """An attempt never handed to its host agent left nothing on the host; every other one has something to remove."""
    if backend_hands_out(task.backend) and not attempt.external_ref:
        return CleanupState.DONE
    return CleanupState.PENDING


def _enqueue_cleanup(task: Task, attempt: Attempt) -> None:
    """Who removes what the attempt left: its host agent, told in its next sync that the attempt is closed
    (and the reconcile pass if the agent never confirms); for the other clouds the reconcile pass, woken now."""
    if not backend_hands_out(task.backend) and attempt.cleanup_state == CleanupState.PENDING:
        transaction.on_commit(dispatch.wake_reconciler)


def attempt_cleanup(*, attempt_id: int) -> bool:
    """Remove what a closed attempt left in its cloud; False while something is left (retried every pass)."""
    attempt = Attempt.objects.select_related("task__connection").get(pk=attempt_id)
    try:
        done = get_backend(attempt.task.connection).cleanup(attempt_ref(attempt))
    except BackendError as exc:
        Attempt.objects.filter(pk=attempt.pk).update(cleanup_error=exc.message, updated_at=timezone.now())
        return False
    crash_point("cleanup.removed")  # still PENDING: the next pass asks again, and the cloud has nothing left
    if done:
        with transaction.atomic():  # an expired debug hold says so with the cleanup, not without it
            Attempt.objects.filter(pk=attempt.pk).update(cleanup_state=CleanupState.DONE, cleanup_error="")
            debug_hold_ended(attempt)
    else:
        Attempt.objects.filter(pk=attempt.pk).update(
            cleanup_error="what the attempt left is still in use; tried again later", updated_at=timezone.now()
        )
    return done
