"""Reads for tasks: every path starts from what the user may see."""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import connection, models
from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from cloudpivot.accounts.models import Membership
from cloudpivot.accounts.quotas import Footprint, task_footprint
from cloudpivot.accounts.selectors import check_owner_or_admin
from cloudpivot.exceptions import NotFound
from tasks import list_json
from tasks.choices import HOLDS_QUOTA, CleanupState, TaskState
from tasks.models import Attempt, Task


def tasks_visible_to(*, user: AbstractBaseUser) -> QuerySet[Task]:
    """Tasks of the projects the user belongs to (any role); platform staff see all."""
    tasks = Task.objects.select_related("project", "owner", "connection")
    if user.is_superuser:
        return tasks
    # A literal list, not a subquery: with one project (the usual case) the database walks the
    # (project, created_at, id) index in order instead of sorting every task of the project.
    project_ids = list(Membership.objects.filter(user=user).values_list("project_id", flat=True))
    if len(project_ids) == 1:
        return tasks.filter(project_id=project_ids[0])
    return tasks.filter(project_id__in=project_ids)


# What a list row shows (tasks/api/serializers.py TaskListSerializer, the same shape as TaskSerializer): the
# original document (`spec`) and the related rows' other columns (a user's password hash, a connection's
# options) are not read for a list. Plain dicts (`.values()`), not model instances: building 50 Task objects
# and walking DRF's per-field machinery was most of a list request's CPU.
LIST_COLUMNS = (
    "id", "name", "state", "state_reason", "state_changed_at", "backend", "normalized", "spec_sha256",
    "retry_limit", "timeout_seconds", "attempts_count", "failed_attempts", "exit_code", "result",
    "next_attempt_at", "created_at", "started_at", "finished_at", "last_event_seq", "connection_id",
    "project__slug", "owner__username", "connection__cloud_id",
)  # fmt: skip


def tasks_for_list(*, user: AbstractBaseUser, json_rows_at: str | None = None) -> QuerySet:
    """The visible tasks as dicts of the columns a list shows. Queue places are added per page afterwards
    (`queue_positions`), so the filtered, ordered query stays a plain index walk. With `json_rows_at` (the
    tasks' URL prefix; PostgreSQL only, tasks/list_json.py): each row's JSON as `row`, written by the
    database, beside the few columns the cursor and the queue places need."""
    tasks = tasks_visible_to(user=user).select_related(None)
    if json_rows_at is not None:
        return tasks.values(*list_json.PLAIN_COLUMNS, row=list_json.row_json(url_prefix=json_rows_at))
    return tasks.values(*LIST_COLUMNS)


def queue_positions(*, rows: list[dict[str, Any]]) -> dict[uuid.UUID, int]:
    """Queue place of each PENDING row of a page (task id → 1 for the next one of its connection, 2 …), in one
    window query over the waiting tasks of the page's connections, not one COUNT (or subquery) per row.

    The window is numbered in an inner query and the page's ids picked in the outer one (a filter on the id
    beside the window would number only the page's rows). Tasks created after the page's newest waiting row
    cannot be ahead of it, so they are not numbered."""
    waiting = [row for row in rows if row["state"] == "PENDING"]
    if not waiting:
        return {}
    numbered = (
        Task.objects.filter(
            state="PENDING",
            connection_id__in=sorted({row["connection_id"] for row in waiting}),
            created_at__lte=max(row["created_at"] for row in waiting),
        )
        .order_by()
        .annotate(place=Window(RowNumber(), partition_by=[F("connection_id")], order_by=[F("created_at"), F("id")]))
        .values("id", "place")
    )
    inner, params = numbered.query.sql_with_params()
    pk = Task._meta.pk
    ids = [pk.get_db_prep_value(row["id"], connection) for row in waiting]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT numbered.id, numbered.place FROM ({inner}) numbered WHERE numbered.id IN ({', '.join(['%s'] * len(ids))})",  # noqa: E501, S608 - placeholders only
            [*params, *ids],
        )
        return {uuid.UUID(str(task_id)): place for task_id, place in cursor.fetchall()}


def task_get_for_user(*, user: AbstractBaseUser, task_id: Any, only: tuple[str, ...] = ()) -> Task:
    """The task, or NotFound (also for foreign ones, so ids cannot be probed). With `only`, just those
    columns of the task and none of its related rows (a hot read that needs little, like a log poll)."""
    tasks = tasks_visible_to(user=user)
    if only:
        tasks = tasks.select_related(None).only(*only)
    try:
        return tasks.get(pk=task_id)
    except (Task.DoesNotExist, ValueError, TypeError, ValidationError):  # ValidationError: not a UUID
        raise NotFound(f"task {task_id} not found") from None


def task_check_can_act(*, user: AbstractBaseUser, task: Task) -> None:
    """Cancel and retry: project admins on any task, submitters on their own; readers never."""
    check_owner_or_admin(user=user, project=task.project, owner_id=task.owner_id, what="task")


def task_queue_position(*, task: Task) -> int | None:
    """1 for the next PENDING task of its connection, 2 for the one after it …; None when not waiting."""
    if task.state != "PENDING":
        return None
    ahead = Task.objects.filter(connection_id=task.connection_id, state="PENDING").filter(
        models.Q(created_at__lt=task.created_at) | models.Q(created_at=task.created_at, id__lt=task.id)
    )
    return ahead.count() + 1


def queue_ahead_sql() -> str:
    """What `task_queue_position` counts, as an SQL expression over a task row being inserted (the `also_return`
    of cloudpivot.rows.objects_insert): the PENDING tasks of its connection ahead of it. A submit learns its place
    from its own INSERT, not from a COUNT after its commit: no statement more, no query compiled per submit."""
    return _queue_ahead_sql(connection.vendor)


@cache
def _queue_ahead_sql(vendor: str) -> str:
    quote, meta = connection.ops.quote_name, Task._meta
    table = quote(meta.db_table)
    conn, state, created, pk = (
        quote(meta.get_field(name).column) for name in ("connection", "state", "created_at", "id")
    )
    return (
        f"(SELECT COUNT(*) FROM {table} AS ahead WHERE ahead.{conn} = {table}.{conn} "  # noqa: S608 - names only
        f"AND ahead.{state} = '{TaskState.PENDING.value}' AND (ahead.{created} < {table}.{created} "
        f"OR (ahead.{created} = {table}.{created} AND ahead.{pk} < {table}.{pk})))"
    )


def task_quota_usage(*, project_id: int, connection_id: int | None) -> Footprint:
    """What the project's admitted, unfinished tasks hold (on one connection, or on all), and the attempts kept
    on a debug hold until they are cleaned up: each holds its pod or VM beside any retry of its task."""
    tasks = Task.objects.filter(project_id=project_id, state__in=HOLDS_QUOTA)
    held = Attempt.objects.filter(
        cleanup_state=CleanupState.PENDING, hold_until__isnull=False, task__project_id=project_id
    )
    if connection_id is not None:
        tasks = tasks.filter(connection_id=connection_id)
        held = held.filter(task__connection_id=connection_id)
    total = Footprint()
    for spec in tasks.values_list("normalized", flat=True):
        total = total + task_footprint(spec)
    for spec in held.values_list("task__normalized", flat=True):
        total = total + task_footprint(spec)
    return total
