"""Reads for task sets: every path starts from what the user may see, as for tasks (a foreign set is a 404)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet

from cloudpivot.accounts.models import Membership
from cloudpivot.accounts.selectors import check_owner_or_admin
from cloudpivot.exceptions import NotFound
from tasks.choices import TaskState
from tasksets.choices import TaskSetState
from tasksets.models import SetElement, TaskSet

WAITING = "waiting"  # the progress count of elements not yet made Tasks


def tasksets_visible_to(*, user: AbstractBaseUser) -> QuerySet[TaskSet]:
    """Sets of the projects the user belongs to (any role); platform staff see all."""
    sets = TaskSet.objects.select_related("project", "owner", "connection")
    if user.is_superuser:
        return sets
    return sets.filter(project_id__in=Membership.objects.filter(user=user).values("project_id"))


def taskset_get_for_user(*, user: AbstractBaseUser, set_id: Any) -> TaskSet:
    """The set, or NotFound (also for a foreign one, so ids cannot be probed)."""
    try:
        return tasksets_visible_to(user=user).get(pk=set_id)
    except (TaskSet.DoesNotExist, ValueError, TypeError, ValidationError):  # ValidationError: not a UUID
        raise NotFound(f"task set {set_id} not found") from None


def taskset_check_can_act(*, user: AbstractBaseUser, task_set: TaskSet) -> None:
    """Cancel and retry: project admins on any set, submitters on their own; readers never (as for tasks)."""
    check_owner_or_admin(user=user, project=task_set.project, owner_id=task_set.owner_id, what="task set")


def taskset_counts(*, task_sets: list[TaskSet]) -> dict[Any, dict[str, int]]:
    """Each set's elements by state (set id → counts), in one query: each task state in lower case for the
    elements made so far, and `waiting` for the rest. A cancelled set's elements that were never made count as
    `cancelled`: they never will be."""
    counts = {s.pk: {state.lower(): 0 for state in TaskState.values} for s in task_sets}
    rows = (
        SetElement.objects.filter(task_set__in=[s.pk for s in task_sets])
        .values("task_set", "task__state")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for row in rows:
        counts[row["task_set"]][row["task__state"].lower()] = row["n"]
    for task_set in task_sets:
        never = task_set.total - task_set.materialized
        if task_set.state == TaskSetState.CANCELLED:
            counts[task_set.pk][TaskState.CANCELLED.lower()] += never
            never = 0
        counts[task_set.pk][WAITING] = never
    return counts


def taskset_elements(
    *, task_set: TaskSet, after_index: int = -1, limit: int = 100, state: str | None = None
) -> QuerySet[SetElement]:
    """The elements made so far, in index order from after `after_index`, with their tasks."""
    elements = SetElement.objects.filter(task_set=task_set, index__gt=after_index).select_related("task")
    if state:
        elements = elements.filter(task__state=state)
    return elements.order_by("index")[:limit]
