"""Read helpers for the portal pages and websocket consumers.

Everything here starts from an object the caller already got through a visibility
selector (tasks.selectors) and only reads; writes stay in tasks.services.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet

from cloudpivot.accounts.models import Project, Role
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.exceptions import PermissionDenied
from clusters.models import CloudConnection
from clusters.selectors import connections_visible_to
from tasks.choices import ACTIVE, EXECUTING, STATE_BADGE, TERMINAL, TaskState
from tasks.models import Attempt, LogChunk, Task, TaskEvent
from tasks.selectors import task_check_can_act, task_queue_position, tasks_visible_to
from tasks.services.logs import log_read

# The part of a log a page shows at first; earlier text is loaded on demand.
LOG_TAIL_BYTES = 256 * 1024
# The most one websocket message carries.
LOG_MESSAGE_BYTES = 64 * 1024
QUEUED = frozenset({TaskState.PENDING, TaskState.RETRY_WAIT})
DASHBOARD_RECENT = 10


# ---------------------------------------------------------------------------- dashboard and lists
def dashboard_tasks(*, user: AbstractBaseUser) -> dict[str, list[Task]]:
    """The user's own running (executing), queued and recently finished tasks."""
    mine = tasks_visible_to(user=user).filter(owner=user)
    queued = list(mine.filter(state__in=QUEUED).order_by("created_at")[:50])
    for task in queued:  # at most 50 small counts; the place in the queue is what a waiting user asks first
        task.queue_position = task_queue_position(task=task)
    return {
        "running": list(mine.filter(state__in=EXECUTING).order_by("-created_at")[:50]),
        "queued": queued,
        "recent": list(mine.filter(state__in=TERMINAL).order_by("-finished_at", "-created_at")[:DASHBOARD_RECENT]),
    }


def connections_with_load(*, user: AbstractBaseUser) -> QuerySet[CloudConnection]:
    """Usable connections with how many tasks are active on each (what admission counts against the limit)."""
    busy = Q(tasks__state__in=ACTIVE - {TaskState.PENDING})
    return connections_visible_to(user=user).annotate(
        active_tasks=Count("tasks", filter=busy, distinct=True),
        pending_tasks=Count("tasks", filter=Q(tasks__state=TaskState.PENDING), distinct=True),
    )


def submit_projects(*, user: AbstractBaseUser) -> list[Project]:
    """Projects through which the user may submit (submitter or admin)."""
    if user.is_superuser:
        return list(Project.objects.all())
    roles = [Role.SUBMITTER, Role.ADMIN]
    return list(Project.objects.filter(memberships__user=user, memberships__role__in=roles).order_by("slug"))


def task_permissions(*, user: AbstractBaseUser, task: Task) -> dict[str, bool]:
    """Which action buttons the page shows: the same rule the API enforces."""
    try:
        task_check_can_act(user=user, task=task)
        can_act = True
    except PermissionDenied:  # a reader, or a submitter on another user's task
        can_act = False
    return {
        "can_cancel": can_act and task.state not in TERMINAL and task.state != TaskState.CANCELLING,
        "can_retry": can_act and (task.state in TERMINAL or task.state == TaskState.UNKNOWN),
        "can_clone": role_at_least(project_role(user=user, project=task.project), Role.SUBMITTER),
        "can_release_hold": can_act,  # shown only beside an attempt on a debug hold
    }


def task_state_payload(task: Task | dict[str, Any]) -> dict[str, Any]:
    """The JSON a page needs to redraw a state badge (websocket messages)."""
    get = task.get if isinstance(task, dict) else lambda name: getattr(task, name)
    state = get("state")
    return {
        "state": state,
        "label": TaskState(state).label,
        "badge": STATE_BADGE.get(state, "grey"),
        "reason": get("state_reason") or "",
        "terminal": state in TERMINAL,
    }


# ---------------------------------------------------------------------------- events
def events_after(*, task_id: Any, after_seq: int, limit: int = 200) -> list[dict[str, Any]]:
    """Up to `limit` events with seq > after_seq, as websocket-ready dicts."""
    rows = TaskEvent.objects.filter(task_id=task_id, seq__gt=after_seq).order_by("seq")[:limit]
    return [event_payload(event) for event in rows]


def event_payload(event: TaskEvent) -> dict[str, Any]:
    return {
        "type": "event",
        "seq": event.seq,
        "event": event.type,
        "message": event.message,
        "data": event.data,
        "time": event.created_at.isoformat(),
    }


# ---------------------------------------------------------------------------- logs
def latest_attempt(task: Task | Any) -> Attempt | None:
    task_id = task.pk if isinstance(task, Task) else task
    return Attempt.objects.filter(task_id=task_id).order_by("-number").first()


def log_tail(*, task: Task, attempt: Attempt | None, window: int = LOG_TAIL_BYTES) -> dict[str, Any]:
    """The last `window` bytes of an attempt's log (both streams): what the detail page shows first."""
    if attempt is None:
        return {"attempt": 0, "start": 0, "end": 0, "data": "", "total": 0}
    start = max(0, attempt.log_bytes - window)
    piece = log_read(task=task, attempt_number=attempt.number, offset=start, limit=window)
    return {
        "attempt": attempt.number,
        "start": start,
        "end": piece["next_offset"],
        "data": piece["data"],
        "total": attempt.log_bytes,
    }


def log_before(*, task: Task, attempt_number: int, before: int, limit: int = LOG_TAIL_BYTES) -> dict[str, Any]:
    """The `limit` bytes that end at `before` (the "load earlier" button)."""
    start = max(0, before - limit)
    piece = log_read(task=task, attempt_number=attempt_number, offset=start, limit=max(0, before - start))
    return {"attempt": piece["attempt"], "start": start, "end": piece["next_offset"], "data": piece["data"]}


def _log_batches(attempt_id: int, after: int, rows: int = 8) -> list[tuple[int, bytes]]:
    chunks = LogChunk.objects.filter(attempt_id=attempt_id, position__gte=after).order_by("position")
    return [(position, bytes(data)) for position, data in chunks.values_list("position", "data")[:rows]]


def log_bytes_iter(attempt: Attempt) -> Iterator[bytes]:
    """The whole stored log of an attempt, chunk by chunk, in arrival order (a few rows in memory at a time)."""
    after = 0
    while batch := _log_batches(attempt.pk, after):
        for position, data in batch:
            yield data
            after = position + len(data)


async def log_bytes_aiter(attempt: Attempt) -> AsyncIterator[bytes]:
    """The same for ASGI, where a sync iterator would be read into memory whole before sending."""
    after = 0
    while batch := await sync_to_async(_log_batches)(attempt.pk, after):
        for position, data in batch:
            yield data
            after = position + len(data)


# ---------------------------------------------------------------------------- copy as curl / CLI
def task_document(task: Task) -> dict[str, Any]:
    """The document to submit again: the original, bound to the project it ran in."""
    document = dict(task.spec) if isinstance(task.spec, dict) else {}
    document.setdefault("project", task.project.slug)
    return document


def copy_commands(*, task: Task, base_url: str) -> dict[str, str]:
    document = json.dumps(task_document(task), indent=2, ensure_ascii=False)
    curl = (
        f"curl -sS -X POST {shlex.quote(base_url + '/api/v1/tasks')} \\\n"
        '  -H "Authorization: Bearer $CLOUDPIVOT_TOKEN" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f"  --data-binary {shlex.quote(json.dumps(task_document(task), ensure_ascii=False))}"
    )
    # JSON lines never read `EOF` alone (strings are quoted), so the here-document cannot end early.
    cli = f"cloudpivot task submit -f - <<'EOF'\n{document}\nEOF"
    return {"curl": curl, "cli": cli}
