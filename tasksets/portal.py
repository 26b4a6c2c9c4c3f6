"""Read helpers for the set pages: progress as bar segments, the elements with their failure class, buttons.

Everything starts from a set the caller got through tasksets.selectors (a foreign set is a 404); nothing here
writes. Counts are tasksets.selectors.taskset_counts, the API's.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.paginator import Page, Paginator
from django.db.models import F

from cloudpivot.exceptions import PermissionDenied
from tasks.choices import STATE_BADGE, TaskState
from tasks.models import Attempt
from tasks.services.suggestions import FAILURE_CLASSES, failure_class
from tasksets.choices import TaskSetState
from tasksets.models import SetElement, TaskSet
from tasksets.selectors import WAITING, taskset_check_can_act, taskset_counts, tasksets_visible_to

ELEMENTS_PAGE = 50
SETS_PAGE = 25
RECENT_SETS = 5
FAILED_STATES = frozenset({TaskState.FAILED, TaskState.TIMED_OUT})
# The bar's order: what is done first, then what runs, then what waits.
BAR_ORDER = [
    TaskState.SUCCEEDED,
    TaskState.FAILED,
    TaskState.TIMED_OUT,
    TaskState.CANCELLED,
    TaskState.RUNNING,
    TaskState.STARTING,
    TaskState.SUBMITTING,
    TaskState.CANCELLING,
    TaskState.UNKNOWN,
    TaskState.RETRY_WAIT,
    TaskState.PENDING,
]


def progress(task_set: TaskSet, counts: dict[str, int]) -> dict[str, Any]:
    """The bar's segments (those with elements: state, label, n, x and width in percent, colour) and the totals."""
    total = task_set.total or 1
    rows = [(state.lower(), TaskState(state).label, STATE_BADGE.get(state, "grey")) for state in BAR_ORDER]
    rows.append((WAITING, "Waiting (not yet a task)", "none"))
    segments, x = [], 0.0
    for key, label, colour in rows:
        n = counts.get(key, 0)
        if n:
            width = 100.0 * n / total
            segments.append(
                {"key": key, "label": label, "n": n, "x": f"{x:.3f}", "width": f"{width:.3f}", "colour": colour}
            )
            x += width
    ended = sum(counts.get(state.lower(), 0) for state in (TaskState.SUCCEEDED, *FAILED_STATES, TaskState.CANCELLED))
    return {"segments": segments, "ended": ended, "total": task_set.total, "percent": int(100 * ended / total)}


def with_progress(sets: list[TaskSet]) -> list[TaskSet]:
    """Each set with its `progress` (one counts query for them all)."""
    counts = taskset_counts(task_sets=sets)
    for task_set in sets:
        task_set.progress = progress(task_set, counts[task_set.pk])
    return sets


def sets_page(*, user: AbstractBaseUser, number: Any) -> Page:
    """The sets the user may see, newest first, SETS_PAGE a page, each with its progress."""
    page = Paginator(tasksets_visible_to(user=user).defer("items").order_by("-created_at", "-id"), SETS_PAGE).get_page(
        number
    )
    page.object_list = with_progress(list(page.object_list))
    return page


def recent_sets(*, user: AbstractBaseUser) -> list[TaskSet]:
    """The dashboard's few: the user's own newest sets."""
    return with_progress(
        list(tasksets_visible_to(user=user).defer("items").filter(owner=user).order_by("-created_at")[:RECENT_SETS])
    )


def elements_page(*, task_set: TaskSet, state: str, number: Any) -> Page:
    """The set's elements made so far (of one task state, if given), in index order, ELEMENTS_PAGE a page; a
    failed one with `failure_class` and `failure_words` from its last attempt (one query for the page)."""
    elements = SetElement.objects.filter(task_set=task_set).select_related("task").order_by("index")
    if state:
        elements = elements.filter(task__state=state)
    page = Paginator(elements, ELEMENTS_PAGE).get_page(number)
    rows = list(page.object_list)
    failed = [e.task_id for e in rows if e.task.state in FAILED_STATES]
    last = Attempt.objects.filter(task_id__in=failed, number=F("task__attempts_count")) if failed else []
    classes = {attempt.task_id: failure_class(attempt) for attempt in last}
    for element in rows:
        element.failure_class = classes.get(element.task_id, "")
        element.failure_words = FAILURE_CLASSES.get(element.failure_class, element.failure_class)
    page.object_list = rows
    return page


def set_permissions(*, user: AbstractBaseUser, task_set: TaskSet, counts: dict[str, int]) -> dict[str, bool]:
    """Which buttons the page shows: the rule the API enforces (owner or project admin), and what the state allows."""
    try:
        taskset_check_can_act(user=user, task_set=task_set)
        can_act = True
    except PermissionDenied:  # a reader, or a submitter on another user's set
        can_act = False
    failed = sum(counts.get(state.lower(), 0) for state in FAILED_STATES)
    return {
        "can_cancel": can_act and task_set.state == TaskSetState.ACTIVE,
        "can_retry_failed": can_act and task_set.state != TaskSetState.CANCELLED and failed > 0,
    }


def template_summary(task_set: TaskSet) -> list[tuple[str, str]]:
    """The template's main fields in words, for the page's summary (the whole document is shown below it)."""
    template = task_set.template or {}
    rows = [("Name", template.get("name") or "—"), ("Command", " ".join(map(str, template.get("command") or [])))]
    if template.get("image"):
        rows.append(("Image", str(template["image"])))
    resources = template.get("resources") or {}
    if resources:
        rows.append(("Resources", ", ".join(f"{key} {value}" for key, value in resources.items())))
    if task_set.count is not None:
        rows.append(("Elements", f"count {task_set.count}"))
    else:
        first = TaskSet.objects.filter(pk=task_set.pk).values_list("items__0", flat=True).first()  # not all items
        names = ", ".join(sorted(first)) if isinstance(first, dict) else ""
        rows.append(("Elements", f"{task_set.total} parameter rows ({names})" if names else f"{task_set.total} rows"))
    rows.append(("At most running", str(task_set.max_running) if task_set.max_running else "no limit of its own"))
    return rows
