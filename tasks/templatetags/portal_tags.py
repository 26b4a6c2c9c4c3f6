"""Template helpers for the portal: state badges, pretty JSON, durations, query strings."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django import template
from django.http import QueryDict

from tasks.choices import STATE_BADGE, TaskState
from tasks.services.suggestions import FAILURE_CLASSES

register = template.Library()


@register.inclusion_tag("tasks/_state_badge.html")
def state_badge(task: Any) -> dict[str, Any]:
    """A task's state badge; `data-task-id`/`data-seq` let live updates find it and drop stale news."""
    return {
        "task_id": task.pk,
        "state": task.state,
        "label": TaskState(task.state).label,
        "colour": STATE_BADGE.get(task.state, "grey"),
        "seq": task.last_event_seq,
        "reason": task.state_reason,
    }


@register.filter
def badge_colour(state: str) -> str:
    return STATE_BADGE.get(state, "grey")


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def seconds_between(start: dt.datetime | None, end: dt.datetime | None) -> str:
    """ "1.4 s" between two timestamps, or "" when one is missing."""
    if not start or not end:
        return ""
    return duration((end - start).total_seconds())


@register.filter
def duration(seconds: float | None) -> str:
    """ "1.4 s", "3 min 5 s", "2 h 10 min" for a number of seconds ("" for None)."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@register.filter
def filesize_exact(value: int | None) -> str:
    """Bytes as KiB/MiB with one decimal (Django's filesizeformat rounds too coarsely for logs)."""
    size = float(value or 0)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


@register.simple_tag(takes_context=True)
def query_replace(context: dict[str, Any], **changes: Any) -> str:
    """The current query string with some parameters replaced (None removes one): pagination and sorting links."""
    query: QueryDict = context["request"].GET.copy()
    for key, value in changes.items():
        if value is None or value == "":
            query.pop(key, None)
        else:
            query[key] = value
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.simple_tag(takes_context=True)
def sort_link(context: dict[str, Any], key: str) -> str:
    """Link for a column header: sort by `key`, or reverse it when it is already the sort."""
    current = context.get("sort", "")
    target = f"-{key}" if current == key else key
    return query_replace(context, sort=target, page=None)


@register.simple_tag(takes_context=True)
def sort_state(context: dict[str, Any], key: str) -> str:
    """aria-sort value for a column header."""
    current = context.get("sort", "")
    if current == key:
        return "ascending"
    if current == f"-{key}":
        return "descending"
    return "none"


@register.filter
def task_title(task: Any, length: int = 60) -> str:
    """The task's name, or its command line when it has none."""
    if task.name:
        title = task.name
    else:
        command = (task.normalized or {}).get("command") or []
        title = " ".join(str(arg) for arg in command) or task.short_id
    return title if len(title) <= int(length) else title[: int(length) - 1] + "…"


@register.filter
def failure_words(failure_class: str) -> str:
    """The failure class in words (tasks/services/suggestions.py)."""
    return FAILURE_CLASSES.get(failure_class, failure_class)
