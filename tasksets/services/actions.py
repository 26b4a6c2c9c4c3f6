"""What users do to a set after submitting it: cancel it, retry its failed elements.

Each checks who may on the locked set itself (tasksets.selectors.taskset_check_can_act: the rules of a task),
and acts on the elements through the task services, so an element is cancelled or retried exactly as a single
task is, with its own events.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from cloudpivot.exceptions import Conflict, NotFound
from tasks import dispatch
from tasks.choices import TERMINAL, TaskState
from tasks.services.actions import task_cancel
from tasksets.choices import TaskSetState
from tasksets.models import SetElement, TaskSet
from tasksets.selectors import taskset_check_can_act
from tasksets.services.lifecycle import taskset_end, taskset_open_elements, taskset_transition

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
        SetElement.objects.filter(task_set=task_set).update(retry_asked_by=None)
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


def taskset_retry_failed(*, set_id: Any, user: AbstractBaseUser) -> tuple[TaskSet, int]:
    """Ask for a new attempt of each FAILED or TIMED_OUT element; (the set, how many were asked).

    The retries are made by the reconcile pass as the set has room (its max_running holds for them too), through
    the task retry service as `user`; a set that had finished is open again until they end. 409 when no element
    failed, or the set was cancelled.
    """
    with transaction.atomic():
        task_set = _lock(set_id)
        taskset_check_can_act(user=user, task_set=task_set)
        if task_set.state == TaskSetState.CANCELLED:
            raise Conflict("the task set was cancelled; its elements are not retried", code="set_cancelled")
        failed = SetElement.objects.filter(task_set=task_set, task__state__in=RETRIED_STATES)
        asked = SetElement.objects.filter(pk__in=list(failed.values_list("pk", flat=True))).update(retry_asked_by=user)
        if not asked:
            raise Conflict("no element of the task set failed; nothing to retry", code="nothing_failed")
        if task_set.state == TaskSetState.FINISHED:
            taskset_transition(task_set=task_set, to=TaskSetState.ACTIVE, reason=f"failed elements retried by {user}")
        transaction.on_commit(dispatch.wake_reconciler)
    return task_set, asked


def _lock(set_id: Any) -> TaskSet:
    """The set's row locked (the lock the materializer takes), not its project's: admission locks projects."""
    try:
        return TaskSet.objects.select_for_update(of=("self",)).select_related("project").get(pk=set_id)
    except TaskSet.DoesNotExist:
        raise NotFound(f"task set {set_id} not found") from None
