"""What users do to a set after submitting it: cancel it, retry its failed elements (with changes), delete it.

Each checks who may on the locked set itself (tasksets.selectors.taskset_check_can_act: the rules of a task),
and acts on the elements through the task services, so an element is cancelled or retried exactly as a single
task is, with its own events.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from cloudpivot.exceptions import Conflict, InvalidSpec, NotFound
from tasks import dispatch
from tasks.choices import TERMINAL, TaskState
from tasks.services.actions import task_cancel
from tasks.services.spec_changes import spec_apply_changes
from tasks.specs import spec_normalize
from tasksets.changes import changed_template, changes_paths, element_changes
from tasksets.choices import TaskSetState
from tasksets.models import SetElement, TaskSet
from tasksets.selectors import taskset_check_can_act
from tasksets.services.lifecycle import taskset_announce_deleted, taskset_end, taskset_open_elements, taskset_transition
from tasksets.specs import fields_under
from tasksets.templating import elements_check

# The element states a retry-failed takes: those the program or its limits ended, not a cancel or a success.
RETRIED_STATES = frozenset({TaskState.FAILED, TaskState.TIMED_OUT})


def taskset_cancel(*, set_id: Any, user: AbstractBaseUser) -> TaskSet:
    """Cancel the set: no further element is made, and each made one that has not ended is cancelled as a task
    cancel does (a waiting one at once, a running one stopped first). Idempotent on a cancelled set.

    The set's row lock is the one the materializer takes: once this commits, no element is made any more, and
    every element made before it is among those cancelled here, in the same transaction.
    """
    with transaction.atomic():
        task_set = _lock(set_id)
        taskset_check_can_act(user=user, task_set=task_set)
        if task_set.state == TaskSetState.FINISHED:
            raise Conflict("the task set already finished; nothing to cancel", code="set_finished")
        if task_set.state == TaskSetState.ACTIVE:
            taskset_transition(task_set=task_set, to=TaskSetState.CANCELLED, reason=f"cancelled by {user}")
        SetElement.objects.filter(task_set=task_set).update(retry_asked_by=None, retry_changes=None)
        open_tasks = SetElement.objects.filter(task_set=task_set).exclude(task__state__in=TERMINAL)
        for task_id in open_tasks.values_list("task_id", flat=True):
            try:
                with transaction.atomic():
                    task_cancel(task_id=task_id, user=user)
            except Conflict:  # it ended meanwhile
                pass
        if not taskset_open_elements(task_set):  # nothing runs on: the set ends now (else the pass, when it has)
            taskset_end(task_set=task_set)
    return task_set


def taskset_retry_failed(
    *, set_id: Any, user: AbstractBaseUser, changes: dict[str, Any] | None = None
) -> tuple[TaskSet, int]:
    """Ask for a new attempt of each FAILED or TIMED_OUT element; (the set, how many were asked).

    The retries are made by the reconcile pass as the set has room (its max_running holds for them too), through
    the task retry service as `user`; a set that had finished is open again until they end. 409 when no element
    failed, or the set was cancelled. `changes` (a partial task document, tasksets.changes) change the failed
    elements' specs for their new attempts: checked first as a whole (the template with them, every element's
    substitution, and a failed element's task as the task retry checks it), so a 400 names `changes.<field>`
    and nothing is asked.
    """
    paths = None
    if changes is not None:
        task_set = _get(set_id)
        taskset_check_can_act(user=user, task_set=task_set)  # who may first: a refusal does not hang on the changes
        paths = _changes_check(task_set, changes)
    with transaction.atomic():
        task_set = _lock(set_id)
        taskset_check_can_act(user=user, task_set=task_set)
        if task_set.state == TaskSetState.CANCELLED:
            raise Conflict("the task set was cancelled; its elements are not retried", code="set_cancelled")
        failed = SetElement.objects.filter(task_set=task_set, task__state__in=RETRIED_STATES)
        asked = SetElement.objects.filter(pk__in=list(failed.values_list("pk", flat=True))).update(
            retry_asked_by=user, retry_changes=paths
        )
        if not asked:
            raise Conflict("no element of the task set failed; nothing to retry", code="nothing_failed")
        if task_set.state == TaskSetState.FINISHED:
            how = "with changes " if paths else ""
            reason = f"failed elements retried {how}by {user}"
            taskset_transition(task_set=task_set, to=TaskSetState.ACTIVE, reason=reason)
        transaction.on_commit(dispatch.wake_reconciler)
    return task_set, asked


def _changes_check(task_set: TaskSet, changes: Any) -> dict[str, Any]:
    """The changes as dotted paths, checked as a whole, or InvalidSpec naming `changes.<field>` (`items.N.<name>`
    for an item that lacks a parameter the changes use)."""
    paths = changes_paths(changes)
    template = changed_template(task_set.template, paths)
    with fields_under("changes"):
        spec_normalize(template)
    try:
        elements_check(template, count=task_set.count, items=task_set.items)
    except InvalidSpec as exc:
        for error in exc.errors:
            if error["field"].startswith("template."):
                error["field"] = "changes." + error["field"].removeprefix("template.")
        exc.message = f"invalid change: {exc.errors[0]['field']}: {exc.errors[0]['message']}"
        raise
    element = (
        SetElement.objects.filter(task_set=task_set, task__state__in=RETRIED_STATES)
        .select_related("task__connection", "task__project")
        .order_by("index")
        .first()
    )
    if element is not None:  # the document as a task retry checks it: the cloud's checks, the quota
        params = task_set.items[element.index] if task_set.items is not None else None
        element_paths = element_changes(
            task_set.template, paths, index=element.index, params=params, set_name=task_set.name
        )
        with fields_under("changes"):
            spec_apply_changes(task=element.task, changes=element_paths)
    return paths


def taskset_delete(*, set_id: Any, user: AbstractBaseUser) -> None:
    """Delete a FINISHED or CANCELLED set: its row and its element links. Its elements stay, as ordinary tasks
    (their history, logs and outputs theirs); a `set.deleted` entry says so. 409 `set_active` on an active set."""
    with transaction.atomic():
        task_set = _lock(set_id)
        taskset_check_can_act(user=user, task_set=task_set)
        if task_set.state == TaskSetState.ACTIVE:
            raise Conflict(
                "the task set is active; cancel it first (POST /api/v1/task-sets/{id}/cancel), then delete it",
                code="set_active",
            )
        taskset_announce_deleted(task_set=task_set, by=user)
        task_set.delete()  # its SetElement rows go with it (CASCADE); the tasks are not touched


def _get(set_id: Any) -> TaskSet:
    try:
        return TaskSet.objects.select_related("project").get(pk=set_id)
    except TaskSet.DoesNotExist:
        raise NotFound(f"task set {set_id} not found") from None


def _lock(set_id: Any) -> TaskSet:
    """The set's row locked (the lock the materializer takes), not its project's: admission locks projects."""
    try:
        return TaskSet.objects.select_for_update(of=("self",)).select_related("project").get(pk=set_id)
    except TaskSet.DoesNotExist:
        raise NotFound(f"task set {set_id} not found") from None
