"""Where an attempt's start-up time went: its phase list, and a cloud's typical time per phase.

Read only, from what is already recorded: the attempt's phase timestamps (admitted, cloud object
created, booted, Runner contact, program started, finished) and, for when it began to wait, the
task's `state` events (the last move to PENDING or RETRY_WAIT before admission; the task's creation
for the first attempt). A phase the backend does not have (a `local` task boots nothing) is absent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from tasks.choices import TaskState
from tasks.models import Attempt, TaskEvent

# (key, label, the Attempt field that marks its start); a phase lasts until the next recorded mark.
MARKS = (
    ("queued", "queued", None),
    ("admitted", "admitted", "admitted_at"),
    ("cloud_created", "cloud object created", "cloud_created_at"),
    ("booted", "scheduled / booted", "booted_at"),
    ("runner_contact", "Runner contact", "runner_contact_at"),
    ("program_started", "program started", "program_started_at"),
    ("finished", "finished", "finished_at"),
)
LABELS = {key: label for key, label, _field in MARKS}
WAITING = (TaskState.PENDING, TaskState.RETRY_WAIT)
STATS_WINDOW = dt.timedelta(days=1)
STATS_MAX_ATTEMPTS = 5000  # a busy cloud's day: the newest ones, enough for a p95


def queued_since(attempts: Iterable[Attempt]) -> dict[int, dt.datetime]:
    """attempt pk → when its task began waiting for it, in one query for all the given attempts."""
    attempts = list(attempts)
    task_ids = {a.task_id for a in attempts}
    waits: dict[Any, list[dt.datetime]] = {}
    if task_ids:
        rows = (
            TaskEvent.objects.filter(task_id__in=task_ids, type="state", data__to__in=list(WAITING))
            .order_by("created_at")
            .values_list("task_id", "created_at")
        )
        for task_id, created_at in rows:
            waits.setdefault(task_id, []).append(created_at)
    result = {}
    for attempt in attempts:
        admitted = attempt.admitted_at or attempt.created_at
        earlier = [t for t in waits.get(attempt.task_id, []) if t <= admitted]
        result[attempt.pk] = earlier[-1] if earlier else attempt.task.created_at
    return result


def attempt_phases(attempt: Attempt, queued_at: dt.datetime | None, now: dt.datetime | None = None) -> list[dict]:
    """The attempt's recorded marks in order, each with how long it lasted (until the next mark; until now for
    the last one of an attempt still going, else 0) and its share of the whole for the timeline bar."""
    marks = [("queued", queued_at)] + [(key, getattr(attempt, field)) for key, _label, field in MARKS[1:]]
    marks = [(key, at) for key, at in marks if at is not None]
    now = now or timezone.now()
    phases = []
    for index, (key, at) in enumerate(marks):
        if index + 1 < len(marks):
            end = marks[index + 1][1]
        else:
            end = at if key == "finished" or attempt.closed_at else now
        phases.append({"phase": key, "label": LABELS[key], "at": at, "seconds": max(0.0, (end - at).total_seconds())})
    total = sum(p["seconds"] for p in phases) or 1.0
    offset = 0.0
    for phase in phases:
        phase["percent"] = round(100 * phase["seconds"] / total, 2)
        phase["offset"] = round(offset, 2)  # where its piece of the bar begins (an SVG x: no inline styles)
        offset += phase["percent"]
    return phases


def attempts_with_phases(attempts: list[Attempt]) -> list[Attempt]:
    """Give each attempt its `phases` (one events query for all of them); returns the list."""
    since = queued_since(attempts)
    now = timezone.now()
    for attempt in attempts:
        attempt.phases = attempt_phases(attempt, since.get(attempt.pk), now)
    return attempts


def phase_stats(attempts: QuerySet[Attempt], now: dt.datetime | None = None) -> list[dict]:
    """p50 and p95 seconds per phase over the attempts admitted in the last day (finished phases only)."""
    now = now or timezone.now()
    recent = list(
        attempts.filter(admitted_at__gte=now - STATS_WINDOW, closed_at__isnull=False)
        .select_related("task")
        .order_by("-admitted_at")[:STATS_MAX_ATTEMPTS]
    )
    durations: dict[str, list[float]] = {}
    for attempt in attempts_with_phases(recent):
        for phase in attempt.phases:
            if phase["phase"] != "finished":
                durations.setdefault(phase["phase"], []).append(phase["seconds"])
    return [
        {
            "phase": key,
            "label": label,
            "count": len(durations[key]),
            "p50": _percentile(durations[key], 50),
            "p95": _percentile(durations[key], 95),
        }
        for key, label, _field in MARKS
        if durations.get(key)
    ]


def _percentile(values: list[float], pct: int) -> float:
    """Nearest-rank percentile (a value that occurred), so two samples give their larger one as p95."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return round(ordered[0], 3)
    rank = max(1, -(-pct * len(ordered) // 100))
    return round(ordered[rank - 1], 3)
