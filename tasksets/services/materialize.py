"""Late materialization: a set's elements become Tasks as room frees, a few at a time (HTCondor, Slurm arrays).

Run by each reconcile pass before admission (registered in tasksets/apps.py), so what it makes is admitted in the
same pass. Per set, under the set's row lock (so a cancel, which takes the same lock, is either before it and
nothing is made, or after it and sees every element made):

1. Room: with `max_running`, that many elements open (not ended) at once; without, TASK_SET_AHEAD elements
   PENDING at once (admission takes them as quotas allow, and more are made as it does). At most TASK_SET_AHEAD
   per set per pass in any case, so a pass stays short.
2. Retries asked for (retry-failed) go first, through the task retry service, in index order (with the asked
   changes, substituted for the element).
3. Then the next elements, through the task submission service (tasks.services.submission.task_submit), so each
   one is a task like any other: checked, quota-bound, with its `submitted` event; and each gets its SetElement.
4. A set whose elements were all made and have all ended is FINISHED (and announces `set.finished`). A CANCELLED
   set announces it when its last stopped element has ended (tasksets.services.lifecycle.taskset_end).

An element that cannot be made (its owner lost the right to submit there, say) stops the set where it is, with
the reason on the set; the pass tries again every STALLED_SECONDS, and goes on as soon as it can.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q

from cloudpivot.exceptions import ApplicationError
from tasks.choices import TERMINAL, TaskState
from tasks.services.actions import task_retry
from tasks.services.faults import isolated
from tasks.services.submission import task_submit
from tasksets.changes import element_changes
from tasksets.choices import TaskSetState
from tasksets.models import SetElement, TaskSet
from tasksets.services.lifecycle import taskset_end, taskset_note, taskset_open_elements, taskset_transition
from tasksets.templating import element_document

logger = logging.getLogger(__name__)
STALLED_SECONDS = 5.0
# The sets the pass looks at: those that make elements, and the cancelled ones whose stopped elements run yet.
_OPEN = Q(state=TaskSetState.ACTIVE) | Q(state=TaskSetState.CANCELLED, ended_at__isnull=True)


def sets_materialize() -> int:
    """Make the next elements of every open set that has room; how many elements were made or retried."""
    open_sets = TaskSet.objects.filter(_OPEN).order_by("created_at", "id")
    return sum(
        isolated(f"task set {set_id}", lambda set_id=set_id: set_materialize(set_id=set_id))
        for set_id in open_sets.values_list("pk", flat=True)
    )


def sets_due(last_pass: dt.datetime, now: dt.datetime) -> dt.datetime | None:
    """When the pass next has set work: now if an open set can make or retry an element, or has ended; a while
    after the last pass for a set that is stuck; None while every open set is full or only runs (an element that
    ends rings the doorbell: tasksets/receivers.py)."""
    due = None
    for task_set, open_count, pending, asks in _open_sets():
        if task_set.state == TaskSetState.CANCELLED:
            if not open_count:
                return now  # its last element ended: the pass announces its end
            continue
        left = task_set.materialized < task_set.total or asks
        if left and task_set.state_reason:
            due = last_pass + dt.timedelta(seconds=STALLED_SECONDS)
        elif (left and _room(task_set, open_count, pending) > 0) or not (left or open_count):
            return now
    return due


def set_materialize(*, set_id) -> int:
    """One set's turn (the module's steps 1–4); how many elements were made or retried."""
    with transaction.atomic():
        # `items` (megabytes for a large set) is read only when elements are made, not on every pass's look.
        locked = TaskSet.objects.select_for_update(of=("self",)).select_related("owner", "project").defer("items")
        task_set = locked.filter(pk=set_id).first()
        if task_set is None:  # deleted (a cancelled set may be while its stopped elements end)
            return 0
        if task_set.state == TaskSetState.CANCELLED and task_set.ended_at is None:
            if not taskset_open_elements(task_set):
                taskset_end(task_set=task_set)
            return 0
        if task_set.state != TaskSetState.ACTIVE:
            return 0
        open_count, pending = _open_counts(task_set)
        room = _room(task_set, open_count, pending)
        done = _retries(task_set, room) if room > 0 else 0
        made = _new_elements(task_set, room - done) if room > done else 0
        if not (done or made or open_count) and _all_made_and_ended(task_set):
            taskset_transition(task_set=task_set, to=TaskSetState.FINISHED, reason="every element ended")
        return done + made


def _room(task_set: TaskSet, open_count: int, pending: int) -> int:
    ahead = settings.TASK_SET_AHEAD
    if task_set.max_running:
        return min(ahead, task_set.max_running - open_count)
    return ahead - pending


def _open_counts(task_set: TaskSet) -> tuple[int, int]:
    """How many of the set's Tasks have not ended, and how many of those are PENDING."""
    counts = (
        SetElement.objects.filter(task_set=task_set)
        .exclude(task__state__in=TERMINAL)
        .aggregate(open=Count("pk"), pending=Count("pk", filter=Q(task__state=TaskState.PENDING)))
    )
    return counts["open"], counts["pending"]


def _open_sets() -> list[tuple[TaskSet, int, int, int]]:
    """Every open set with its open and PENDING element counts and its retries asked for, in two queries."""
    columns = ("id", "state", "max_running", "state_reason", "materialized", "total")
    sets = list(TaskSet.objects.filter(_OPEN).only(*columns))
    if not sets:
        return []
    open_element = ~Q(task__state__in=TERMINAL)
    rows = (
        SetElement.objects.filter(task_set__in=[s.pk for s in sets])
        .filter(open_element | Q(retry_asked_by__isnull=False))
        .values("task_set")
        .annotate(
            open=Count("pk", filter=open_element),
            pending=Count("pk", filter=Q(task__state=TaskState.PENDING)),
            asks=Count("pk", filter=Q(retry_asked_by__isnull=False)),
        )
    )
    counts = {row["task_set"]: (row["open"], row["pending"], row["asks"]) for row in rows}
    return [(s, *counts.get(s.pk, (0, 0, 0))) for s in sets]


def _retries(task_set: TaskSet, room: int) -> int:
    """Retries asked for by retry-failed, oldest index first, as the asker (who was allowed to at the time)."""
    asked = list(
        SetElement.objects.filter(task_set=task_set, retry_asked_by__isnull=False)
        .select_related("retry_asked_by")
        .order_by("index")[:room]
    )
    items = None
    if task_set.count is None and any(element.retry_changes for element in asked):
        items = TaskSet.objects.filter(pk=task_set.pk).values_list("items", flat=True).get()
    done = 0
    for element in asked:
        changes = None
        if element.retry_changes:  # the changed fields as this element has them ({{lr}} substituted)
            params = items[element.index] if items is not None else None
            changes = element_changes(
                task_set.template, element.retry_changes, index=element.index, params=params, set_name=task_set.name
            )
        try:
            with transaction.atomic():
                task_retry(task_id=element.task_id, user=element.retry_asked_by, changes=changes)
            done += 1
        except ApplicationError as exc:  # retried meanwhile by hand, or the asker may no longer: the ask ends
            logger.info("task set %s: element %s not retried: %s", task_set.short_id, element.index, exc.message)
    SetElement.objects.filter(pk__in=[element.pk for element in asked]).update(retry_asked_by=None, retry_changes=None)
    return done


def _new_elements(task_set: TaskSet, room: int) -> int:
    """Up to `room` of the next elements as Tasks, each with its link; stops at the first one that cannot be made."""
    first = task_set.materialized
    indexes = range(first, min(task_set.total, first + room))
    made = 0
    for index in indexes:
        params = task_set.items[index] if task_set.count is None else None
        document = element_document(
            task_set.template, index=index, params=params, project=task_set.project.slug, set_name=task_set.name
        )
        try:
            with transaction.atomic():
                task, _ = task_submit(user=task_set.owner, document=document)
                SetElement.objects.create(task_set=task_set, index=index, task=task)
        except ApplicationError as exc:
            taskset_note(task_set=task_set, reason=f"element {index} cannot be made a task: {exc.message}")
            break
        made += 1
    if made:
        task_set.materialized = first + made
        TaskSet.objects.filter(pk=task_set.pk).update(materialized=task_set.materialized)
        taskset_note(task_set=task_set, reason="")
    return made


def _all_made_and_ended(task_set: TaskSet) -> bool:
    if task_set.materialized < task_set.total:
        return False
    waiting = SetElement.objects.filter(task_set=task_set, retry_asked_by__isnull=False).exists()
    return not waiting and not SetElement.objects.filter(task_set=task_set).exclude(task__state__in=TERMINAL).exists()
