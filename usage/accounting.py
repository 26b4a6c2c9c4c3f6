"""Usage read from what ran: core-hours, GPU-hours and memory-GB-hours per project, user and cloud.

An attempt counts from the moment the cloud gave it resources as far as CloudPivot knows (its program
started; else the Runner's first contact; else its cloud object's creation) until it finished (or now), or
until its debug hold ended when its pod or VM was kept after a failure (it held them meanwhile), times what
that attempt was given: the spec it ran with (a retry with changes changes the spec from its attempt on:
tasks.services.spec_changes), whose `resources` the submission filled in from the cloud (a Kubernetes
connection's default requests, an OpenStack flavor's size). An instance counts from its creation to its
deletion, stopped or not: a stopped server keeps its flavor's place, as the clouds' own quotas count it.
Everything is clipped to the period asked for.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from cloudpivot.accounts.quotas import task_footprint
from resources.models import Instance
from tasks.models import Attempt, Task, TaskEvent
from tasks.services.spec_changes import specs_by_attempt

HOUR = Decimal(3600)
MONTH_FORMAT = "%Y-%m"


@dataclass(frozen=True)
class Span:
    """Resources held by one attempt or instance over [began, ended)."""

    project: str
    user: str
    cloud: str
    kind: str  # "task" or "instance"
    vcpu: Decimal
    memory_mb: int
    gpus: int
    began: dt.datetime
    ended: dt.datetime

    def seconds(self, start: dt.datetime, end: dt.datetime) -> Decimal:
        overlap = (min(self.ended, end) - max(self.began, start)).total_seconds()
        return Decimal(str(max(overlap, 0.0)))


@dataclass
class UsageRow:
    project: str
    user: str
    cloud: str
    core_hours: Decimal = Decimal(0)
    gpu_hours: Decimal = Decimal(0)
    memory_gb_hours: Decimal = Decimal(0)
    attempts: int = 0
    instances: int = 0
    keys: tuple = field(default=(), repr=False)

    def add(self, span: Span, seconds: Decimal) -> None:
        self.core_hours += span.vcpu * seconds / HOUR
        self.gpu_hours += span.gpus * seconds / HOUR
        self.memory_gb_hours += Decimal(span.memory_mb) / 1024 * seconds / HOUR
        if span.kind == "task":
            self.attempts += 1
        else:
            self.instances += 1

    def rounded(self) -> dict[str, Any]:
        two = Decimal("0.01")
        return {
            "project": self.project,
            "user": self.user,
            "cloud": self.cloud,
            "core_hours": self.core_hours.quantize(two),
            "gpu_hours": self.gpu_hours.quantize(two),
            "memory_gb_hours": self.memory_gb_hours.quantize(two),
            "attempts": self.attempts,
            "instances": self.instances,
        }


def month_bounds(month: str | None = None) -> tuple[dt.datetime, dt.datetime]:
    """[first instant, first instant of the next month) of `YYYY-MM` (UTC); the current month if None.

    Raises ValueError with a message for anything else."""
    if month is None:
        today = timezone.now()
        start = dt.datetime(today.year, today.month, 1, tzinfo=dt.UTC)
    else:
        try:
            parsed = dt.datetime.strptime(month, MONTH_FORMAT)
        except ValueError:
            raise ValueError(f"'{month}' is not a month: write it as YYYY-MM, e.g. 2026-12") from None
        start = parsed.replace(tzinfo=dt.UTC)
    following = (start + dt.timedelta(days=32)).replace(day=1)
    return start, following


def spans(*, start: dt.datetime, end: dt.datetime, project_ids: list[int] | None = None) -> list[Span]:
    """Every attempt and instance that held resources at some point of [start, end)."""
    now = timezone.now()
    attempts = (
        Attempt.objects.annotate(began=Coalesce("program_started_at", "runner_contact_at", "cloud_created_at"))
        .filter(began__isnull=False, began__lt=end)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=start))
        .values_list(
            "began",
            "finished_at",
            "hold_until",
            "task_id",
            "number",
            "task__normalized",
            "task__project__slug",
            "task__owner__username",
            "task__connection__cloud_id",
        )
    )
    instances = Instance.objects.filter(created_at__lt=end).filter(Q(deleted_at__isnull=True) | Q(deleted_at__gt=start))
    if project_ids is not None:
        attempts = attempts.filter(task__project_id__in=project_ids)
        instances = instances.filter(project_id__in=project_ids)
    found = []
    rows = list(attempts)
    changed = _specs_of_changed_tasks({row[3] for row in rows})
    for began, finished, hold_until, task_id, number, normalized, project, user, cloud in rows:
        footprint = task_footprint(changed.get(task_id, {}).get(number, normalized) or {})
        ended = finished or now
        if hold_until is not None:  # kept for debugging: held until the hold's end (a release sets it then)
            ended = max(ended, min(hold_until, now))
        found.append(
            Span(
                project,
                user,
                cloud,
                "task",
                footprint.vcpu,
                footprint.memory_mb,
                footprint.gpus,
                began,
                ended,
            )
        )
    for created, deleted, vcpus, memory_mb, project, user, cloud in instances.values_list(
        "created_at", "deleted_at", "vcpus", "memory_mb", "project__slug", "owner__username", "connection__cloud_id"
    ):
        found.append(Span(project, user, cloud, "instance", Decimal(vcpus), memory_mb, 0, created, deleted or now))
    return found


def _specs_of_changed_tasks(task_ids: set) -> dict[Any, dict[int, dict[str, Any]]]:
    """task id → attempt number → the spec it ran, for the few tasks a retry with changes changed (found by
    the events' (type, time) index, not by an IN list as long as the month's attempts).

    Every `spec_changed` event's task id is read, and the window's picked out here. Not with the window's
    attempts as a subquery: PostgreSQL then still reads every such event and probes the attempts once for each
    (or scans the window's attempts a second time), measured slower (600,000 tasks, 6,000 changes: ~110 ms
    against ~75 ms). Changes are rare, and their ids are a small read."""
    events = TaskEvent.objects.filter(type="spec_changed").values_list("task_id", flat=True)
    changed = set(events) & task_ids
    return {task.pk: specs_by_attempt(task) for task in Task.objects.filter(pk__in=changed)}


GROUPS = ("project", "user", "cloud")


def usage_rows(
    *, start: dt.datetime, end: dt.datetime, project_ids: list[int] | None = None, by: tuple[str, ...] = GROUPS
) -> list[dict[str, Any]]:
    """Usage in [start, end) summed per the `by` dimensions (the others read "*"), largest core-hours first."""
    rows: dict[tuple, UsageRow] = {}
    for span in spans(start=start, end=end, project_ids=project_ids):
        seconds = span.seconds(start, end)
        if not seconds:
            continue
        key = tuple(getattr(span, dimension) if dimension in by else "*" for dimension in GROUPS)
        row = rows.get(key) or rows.setdefault(key, UsageRow(*key))
        row.add(span, seconds)
    ordered = sorted(rows.values(), key=lambda row: (-row.core_hours, row.project, row.user, row.cloud))
    return [row.rounded() for row in ordered]


def core_hours_by_day(span_list: list[Span], *, start: dt.datetime, end: dt.datetime) -> list[tuple[dt.date, Decimal]]:
    """Cumulative core-hours at the end of each day of [start, end) up to now: the burn-down's points."""
    now = timezone.now()
    points, day = [], start
    while day < end and day <= now:
        day_end = min(day + dt.timedelta(days=1), end)
        used = sum((span.vcpu * span.seconds(start, min(day_end, now)) / HOUR for span in span_list), Decimal(0))
        points.append((day.date(), used))
        day = day_end
    return points


def core_hours(span_list: list[Span], *, start: dt.datetime, end: dt.datetime) -> Decimal:
    return sum((span.vcpu * span.seconds(start, end) / HOUR for span in span_list), Decimal(0))


def projects_grouped(span_list: list[Span]) -> dict[str, list[Span]]:
    grouped: dict[str, list[Span]] = defaultdict(list)
    for span in span_list:
        grouped[span.project].append(span)
    return grouped
