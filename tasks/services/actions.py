"""What users do to a task after submitting it: cancel, retry, hand it to another owner.

Each action checks who may do it on the locked task itself, so the API, the pages, the
admin and any later caller get the same answer (views need not remember to ask).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from cloudpivot.accounts.models import Project, Role
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.exceptions import Conflict, PermissionDenied
from clusters.models import CloudConnection
from clusters.selectors import connection_granted, grant_withdrawn_words
from tasks import dispatch
from tasks.choices import TERMINAL, CleanupState, StopReason, TaskState
from tasks.models import Task
from tasks.selectors import task_check_can_act
from tasks.services.admission import dispatch_off_reason, task_set_waiting_reason
from tasks.services.attempts import attempt_request_stop, attempt_stop_unstarted, current_attempt
from tasks.services.debug_hold import debug_holds_end
from tasks.services.lifecycle import event_append, task_lock, task_transition
from tasks.services.spec_changes import spec_apply_changes


def task_cancel(*, task_id: Any, user: AbstractBaseUser) -> Task:
    """Cancel: a waiting task, or one whose attempt never reached its cloud, ends at once; an executing
    one is stopped first (CANCELLING). Idempotent."""
    with transaction.atomic():
        task = task_lock(task_id)
        task_check_can_act(user=user, task=task)
        if task.state in TERMINAL:
            raise Conflict(f"the task already ended ({task.state}); nothing to cancel", code="task_finished")
        _cancel_locked(task, why=f"cancelled by {user}", asked=f"cancel requested by {user}")
    return task


def _cancel_locked(task: Task, *, why: str, asked: str) -> None:
    """The cancel itself, on a locked task that has not ended: `why` goes into the state change, `asked`
    into the stop request the Runner or the cloud is given."""
    if task.state in (TaskState.PENDING, TaskState.RETRY_WAIT):
        task_transition(task=task, to=TaskState.CANCELLED, reason=why)
        return
    attempt = current_attempt(task)
    if task.state != TaskState.CANCELLING:
        if attempt is not None and not attempt.is_closed:
            attempt_request_stop(task=task, attempt=attempt, reason=StopReason.CANCEL, message=asked)
        task_transition(task=task, to=TaskState.CANCELLING, reason=f"{why}; stopping {attempt}")
    attempt_stop_unstarted(task=task, attempt=attempt)


def tasks_stop_for_withdrawn_grant(*, connection_id: Any, project_id: Any) -> int:
    """A project lost its grant on a connection: its queued tasks and retries there end CANCELLED, its
    running ones are stopped (CANCELLING, then CANCELLED), each with the reason in words. Returns how many.

    Called when an admin removes the grant (tasks/receivers.py); the project may no longer use that cloud,
    so nothing of it may start, retry or go on running there.
    """
    cloud_id = CloudConnection.objects.values_list("cloud_id", flat=True).get(pk=connection_id)
    slug = Project.objects.values_list("slug", flat=True).get(pk=project_id)
    why = "cancelled: " + grant_withdrawn_words(cloud_id=cloud_id, project_slug=slug)
    open_tasks = Task.objects.filter(connection_id=connection_id, project_id=project_id).exclude(state__in=TERMINAL)
    stopped = 0
    for task_id in open_tasks.values_list("pk", flat=True):
        with transaction.atomic():
            task = task_lock(task_id)
            if task.state in TERMINAL:
                continue
            _cancel_locked(task, why=why, asked=why)
            stopped += 1
    debug_holds_end(connection_id=connection_id, project_id=project_id)  # nothing of it may be kept there either
    return stopped


def task_retry(*, task_id: Any, user: AbstractBaseUser, changes: dict[str, Any] | None = None) -> Task:
    """An explicit retry: a finished or UNKNOWN task runs again as a new Attempt, with a fresh retry budget.

    `changes` (field path → value, e.g. the suggestion for its failure) change the spec the new attempt
    runs; they are checked as a submission is, and recorded as a `spec_changed` event.
    """
    new_spec, differences = None, []
    if changes is not None:
        task = Task.objects.select_related("connection", "project").get(pk=task_id)
        _retry_allowed(task, user)  # who may and when first: a refusal should not depend on the changes
        new_spec, differences = spec_apply_changes(task=task, changes=changes)
        expected = task.normalized
    with transaction.atomic():
        task = task_lock(task_id)
        _retry_allowed(task, user)
        if new_spec is not None:
            if task.normalized != expected:
                raise Conflict("the task's spec changed meanwhile; look at it again", code="spec_changed")
            _spec_change(task, new_spec, differences, user)
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
                attempt_id = attempt.pk
                transaction.on_commit(lambda: dispatch.enqueue_stop(attempt_id))
        Task.objects.filter(pk=task.pk).update(failed_attempts=0, started_at=None, next_attempt_at=None, result=None)
        task.failed_attempts, task.started_at, task.result = 0, None, None
        if task.state == TaskState.UNKNOWN:
            task.next_attempt_at = timezone.now()
            Task.objects.filter(pk=task.pk).update(next_attempt_at=task.next_attempt_at)
            task_transition(task=task, to=TaskState.RETRY_WAIT, reason=f"retry requested by {user}")
        else:
            task_transition(task=task, to=TaskState.PENDING, reason=f"retry requested by {user}")
            if task.connection.dispatch_enabled:
                transaction.on_commit(dispatch.enqueue_admission)
            else:  # no admission pass looks at this connection: the task says why it waits now
                task_set_waiting_reason(task=task, reason=dispatch_off_reason(task.connection.cloud_id))
    return task


def _retry_allowed(task: Task, user: AbstractBaseUser) -> None:
    task_check_can_act(user=user, task=task)
    if not connection_granted(connection_id=task.connection_id, project_id=task.project_id):
        words = grant_withdrawn_words(cloud_id=task.connection.cloud_id, project_slug=task.project.slug)
        raise PermissionDenied(f"{words}; the task cannot run there again", code="cloud_not_granted")
    if task.state not in TERMINAL | {TaskState.UNKNOWN}:
        raise Conflict(
            f"only a finished or UNKNOWN task can be retried; this one is {task.state}", code="task_not_finished"
        )


def _spec_change(task: Task, spec: dict[str, Any], differences: list[dict[str, Any]], user: AbstractBaseUser) -> None:
    """The locked task runs `spec` from its next attempt on; the event keeps what it was (specs_by_attempt)."""
    fields = {"normalized": spec, "timeout_seconds": spec["timeout_seconds"], "retry_limit": spec["retry_limit"]}
    Task.objects.filter(pk=task.pk).update(**fields)
    for name, value in fields.items():
        setattr(task, name, value)
    words = ", ".join(f"{d['field']} {d['from']} → {d['to']}" for d in differences) or "nothing"
    event_append(
        task=task,
        type="spec_changed",
        message=f"retry with changes by {user}: {words}",
        data={"attempt": task.attempts_count + 1, "changes": differences, "by": user.get_username()},
    )


def task_change_owner(*, task_id: Any, new_owner: AbstractBaseUser, actor: AbstractBaseUser) -> Task:
    """A project admin hands a task to another submitter or admin of its project; the history says who did it."""
    with transaction.atomic():
        task = task_lock(task_id)
        if not role_at_least(project_role(user=actor, project=task.project), Role.ADMIN):
            raise PermissionDenied(f"only an admin of {task.project.slug} may change a task's owner")
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
