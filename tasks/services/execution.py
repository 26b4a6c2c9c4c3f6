"""Admission, start, cancel, retry and the end of an attempt: how a task moves through a cloud."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from cloudpivot.accounts import quotas
from cloudpivot.accounts.models import Project
from cloudpivot.exceptions import Conflict
from clusters.backends import backend_uses_runner, get_backend
from clusters.backends.base import AttemptRef, BackendError
from clusters.backends.local import local_agent_wake
from clusters.models import CloudConnection
from tasks import credentials, jobs
from tasks.choices import (
    EXECUTING,
    TERMINAL,
    AttemptState,
    CleanupState,
    StopReason,
    TaskState,
    retry_backoff_seconds,
)
from tasks.models import Attempt, Task
from tasks.services.lifecycle import event_append, task_lock, task_transition

logger = logging.getLogger(__name__)


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


def current_attempt(task: Task) -> Attempt | None:
    if not task.attempts_count:
        return None
    return Attempt.objects.select_for_update().filter(task=task, number=task.attempts_count).first()


# ---------------------------------------------------------------------------- admission
def admit_all() -> int:
    """Admit what fits on every connection that has PENDING tasks."""
    with_pending = Task.objects.filter(state=TaskState.PENDING).values_list("connection_id", flat=True).distinct()
    return sum(connection_admit(connection_id=pk) for pk in list(with_pending))


def connection_admit(*, connection_id: int, limit: int = 100) -> int:
    """Admit PENDING tasks of one connection in submission order while they fit; return how many.

    1. Lock the connection row, then the projects' rows (in id order): admissions of one
       connection, and of one project across connections, happen one at a time, so no two
       workers can both take the last free slot of a quota.
    2. Walk the queue oldest first. A task that does not fit waits with the reason, and so
       does every later task of its project (first in, first admitted).
    """
    with transaction.atomic():
        connection = CloudConnection.objects.select_for_update().get(pk=connection_id)
        if not connection.dispatch_enabled:
            return 0
        pending = list(
            Task.objects.filter(connection=connection, state=TaskState.PENDING)
            .select_related("project")
            .order_by("created_at", "id")[:limit]
        )
        if not pending:
            return 0
        project_ids = sorted({task.project_id for task in pending})
        list(Project.objects.select_for_update().filter(pk__in=project_ids).order_by("pk"))
        active = Task.objects.filter(connection=connection, state__in=quotas.HOLDING_STATES).count()
        ledger = {pid: _QuotaLedger(pid, connection.pk) for pid in project_ids}
        admitted, blocked = 0, {}
        for task in pending:
            footprint = quotas.task_footprint(task.normalized)
            reason = blocked.get(task.project_id)
            if reason is None and connection.max_active_tasks and active >= connection.max_active_tasks:
                reason = f"waiting: {connection.cloud_id} runs {active}/{connection.max_active_tasks} tasks"
            reason = reason or ledger[task.project_id].blocking(footprint, task.project)
            if reason:
                blocked[task.project_id] = reason
                task_set_waiting_reason(task=task, reason=reason)
                continue
            task = task_lock(task.pk)
            if task.state != TaskState.PENDING:
                continue
            attempt_create(task=task, reason="admitted")
            ledger[task.project_id].take(footprint)
            active += 1
            admitted += 1
        return admitted


class _QuotaLedger:
    """A project's quotas and usage for one admission pass, updated as tasks are admitted."""

    def __init__(self, project_id: int, connection_id: int) -> None:
        self.quotas = quotas.quotas_for(project_id=project_id, connection_id=connection_id)
        self.used = {
            q.connection_id: quotas.usage(project_id=project_id, connection_id=q.connection_id) for q in self.quotas
        }

    def blocking(self, footprint: quotas.Footprint, project: Project) -> str:
        return quotas.blocking_limit(self.quotas, self.used, footprint, project)

    def take(self, footprint: quotas.Footprint) -> None:
        for key in self.used:
            self.used[key] = self.used[key] + footprint


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
    task.state_reason = reason


def attempt_create(*, task: Task, reason: str) -> Attempt:
    """Commit the intent (the next Attempt and its external name) and move the locked task to SUBMITTING."""
    number = task.attempts_count + 1
    name = f"cp-{task.short_id}-{number}"
    nonce = credentials.new_nonce()
    attempt = Attempt.objects.create(
        task=task,
        number=number,
        external_name=name,
        credential_nonce=nonce,
        runner_token_hash=credentials.runner_credential_hash(external_name=name, nonce=nonce),
        admitted_at=timezone.now(),
    )
    task.attempts_count = number
    task.next_attempt_at = None
    Task.objects.filter(pk=task.pk).update(attempts_count=number, next_attempt_at=None)
    task_transition(
        task=task, to=TaskState.SUBMITTING, reason=f"{reason}: attempt {number} ({name})", data={"attempt": number}
    )
    transaction.on_commit(lambda: jobs.enqueue_start(attempt.pk))
    _ring_host_agents(task)
    return attempt


# ---------------------------------------------------------------------------- start
def attempt_start(*, attempt_id: int) -> str:
    """Ask the cloud for the attempt's execution (idempotent), then record what it answered."""
    attempt = Attempt.objects.select_related("task__connection").get(pk=attempt_id)
    task = attempt.task
    if task.state != TaskState.SUBMITTING or attempt.number != task.attempts_count or attempt.is_closed:
        return f"{attempt}: nothing to start ({task.state})"
    if attempt.stop_requested_at:
        with transaction.atomic():
            task, attempt = lock_task_and_attempt(attempt)
            if task.state == TaskState.SUBMITTING and not attempt.external_ref:
                attempt_close(
                    task=task, attempt=attempt, outcome=stopped_state(attempt), reason="stopped before it was started"
                )
        return f"{attempt}: stopped before start"
    try:
        ref = get_backend(task.connection).ensure_started(attempt_ref(attempt))
    except BackendError as exc:
        return _start_failed(attempt, exc)
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        if not attempt.external_ref:
            attempt.external_ref = ref.ref
            attempt.cloud_created_at = timezone.now()
            attempt.start_error = ""
            if attempt.state == AttemptState.CREATED:
                attempt.state = AttemptState.STARTING
            attempt.save(update_fields=["external_ref", "cloud_created_at", "start_error", "state", "updated_at"])
        if task.state == TaskState.SUBMITTING and attempt.number == task.attempts_count:
            verb = "adopted" if ref.adopted else "created"
            task_transition(
                task=task,
                to=TaskState.STARTING,
                reason=f"{verb} {attempt.external_name}",
                data={"attempt": attempt.number, "external_ref": ref.ref},
            )
    return f"{attempt}: started"


def _start_failed(attempt: Attempt, exc: BackendError) -> str:
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
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


def lock_task_and_attempt(attempt: Attempt) -> tuple[Task, Attempt]:
    task = task_lock(attempt.task_id)
    return task, Attempt.objects.select_for_update().get(pk=attempt.pk)


# ---------------------------------------------------------------------------- the end of an attempt
def attempt_close(
    *, task: Task, attempt: Attempt, outcome: str, reason: str, data: dict[str, Any] | None = None
) -> None:
    """Close a locked attempt and move its locked task to `outcome` (or to RETRY_WAIT when retries are left)."""
    now = timezone.now()
    attempt.closed_at = now
    attempt.finished_at = attempt.finished_at or now
    if attempt.state != AttemptState.LOST:
        attempt.state = AttemptState.FINISHED
    attempt.cleanup_state = CleanupState.PENDING
    attempt.save()
    Task.objects.filter(pk=task.pk).update(exit_code=attempt.exit_code)
    task.exit_code = attempt.exit_code
    extra = {"attempt": attempt.number, "exit_code": attempt.exit_code, **(data or {})}
    if outcome == TaskState.FAILED:
        task.failed_attempts += 1
        Task.objects.filter(pk=task.pk).update(failed_attempts=task.failed_attempts)
        if task.failed_attempts <= task.retry_limit:
            delay = retry_backoff_seconds(task.failed_attempts)
            task.next_attempt_at = now + dt.timedelta(seconds=delay)
            Task.objects.filter(pk=task.pk).update(next_attempt_at=task.next_attempt_at)
            retries_left = task.retry_limit - task.failed_attempts
            task_transition(
                task=task,
                to=TaskState.RETRY_WAIT,
                reason=f"{reason}; retrying in {delay} s ({retries_left} more retries allowed after that)"
                if retries_left
                else f"{reason}; retrying in {delay} s (last retry)",
                data=extra | {"retry_in_seconds": delay},
            )
            _enqueue_cleanup(attempt)
            return
    if task.state != outcome:
        task_transition(task=task, to=outcome, reason=reason, data=extra)
    _enqueue_cleanup(attempt)


def _enqueue_cleanup(attempt: Attempt) -> None:
    attempt_id = attempt.pk
    transaction.on_commit(lambda: jobs.enqueue_cleanup(attempt_id))


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
            transaction.on_commit(lambda: jobs.enqueue_stop(attempt_id))
        _ring_host_agents(task)


def _ring_host_agents(task: Task) -> None:
    """A host agent hears at once of a new attempt or a stop request (docs/runner.md, "The host agent")."""
    if task.backend == "local":
        connection_id = task.connection_id
        transaction.on_commit(lambda: local_agent_wake(connection_id=connection_id))


# ---------------------------------------------------------------------------- user actions
def task_cancel(*, task_id: Any, user: AbstractBaseUser) -> Task:
    """Cancel: a waiting task ends at once; an executing one is stopped first (CANCELLING). Idempotent."""
    with transaction.atomic():
        task = task_lock(task_id)
        if task.state in TERMINAL:
            raise Conflict(f"the task already ended ({task.state}); nothing to cancel", code="task_finished")
        if task.state == TaskState.CANCELLING:
            return task
        if task.state in (TaskState.PENDING, TaskState.RETRY_WAIT):
            task_transition(task=task, to=TaskState.CANCELLED, reason=f"cancelled by {user}")
            return task
        attempt = current_attempt(task)
        attempt_request_stop(
            task=task, attempt=attempt, reason=StopReason.CANCEL, message=f"cancel requested by {user}"
        )
        task_transition(task=task, to=TaskState.CANCELLING, reason=f"cancelled by {user}; stopping {attempt}")
    return task


def task_retry(*, task_id: Any, user: AbstractBaseUser) -> Task:
    """An explicit retry: a finished or UNKNOWN task runs again as a new Attempt, with a fresh retry budget."""
    with transaction.atomic():
        task = task_lock(task_id)
        if task.state not in TERMINAL | {TaskState.UNKNOWN}:
            raise Conflict(
                f"only a finished or UNKNOWN task can be retried; this one is {task.state}", code="task_not_finished"
            )
        if task.state == TaskState.UNKNOWN:
            attempt = current_attempt(task)
            if attempt and not attempt.is_closed:
                attempt_request_stop(
                    task=task,
                    attempt=attempt,
                    reason=StopReason.CANCEL,
                    message=f"{user} asked to retry; the uncertain attempt is stopped",
                )
                attempt.closed_at = timezone.now()
                attempt.cleanup_state = CleanupState.PENDING
                attempt.save(update_fields=["closed_at", "cleanup_state", "updated_at"])
                attempt_ref_id = attempt.pk
                transaction.on_commit(lambda: jobs.enqueue_stop(attempt_ref_id))
        Task.objects.filter(pk=task.pk).update(failed_attempts=0, started_at=None, next_attempt_at=None, result=None)
        task.failed_attempts, task.started_at, task.result = 0, None, None
        if task.state == TaskState.UNKNOWN:
            task.next_attempt_at = timezone.now()
            Task.objects.filter(pk=task.pk).update(next_attempt_at=task.next_attempt_at)
            task_transition(task=task, to=TaskState.RETRY_WAIT, reason=f"retry requested by {user}")
        else:
            task_transition(task=task, to=TaskState.PENDING, reason=f"retry requested by {user}")
            transaction.on_commit(jobs.enqueue_admission)
    return task


def executing_attempts(connection: CloudConnection) -> list[Attempt]:
    """Open attempts of tasks that may be executing on this connection."""
    return list(
        Attempt.objects.select_related("task")
        .filter(task__connection=connection, task__state__in=EXECUTING, closed_at__isnull=True)
        .exclude(external_ref="")
    )


def task_change_owner(*, task_id: Any, new_owner: AbstractBaseUser, actor: AbstractBaseUser) -> Task:
    """An admin hands a task to another member of its project; the history says who did it."""
    from cloudpivot.accounts.models import Role
    from cloudpivot.accounts.selectors import project_role, role_at_least

    with transaction.atomic():
        task = task_lock(task_id)
        previous = task.owner
        if previous.pk == new_owner.pk:
            return task
        if not role_at_least(project_role(user=new_owner, project=task.project), Role.SUBMITTER):
            raise Conflict(
                f"{new_owner} is not a submitter or admin of {task.project}; add them to it first", code="not_a_member"
            )
        Task.objects.filter(pk=task.pk).update(owner=new_owner)
        task.owner = new_owner
        event_append(
            task=task,
            type="owner_changed",
            message=f"owner changed from {previous} to {new_owner} by {actor}",
            data={"from": previous.get_username(), "to": new_owner.get_username(), "by": actor.get_username()},
        )
    return task
