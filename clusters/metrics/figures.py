"""The platform's own figures, read now from the database: one place for the sampler and for /metrics.

Every function is a handful of aggregate queries, whatever the number of tasks, so a scrape stays cheap.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, F, Min, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from cloudpivot.accounts.models import Quota
from cloudpivot.accounts.quotas import LIMITS, Footprint, task_footprint
from clusters.models import CloudConnection

# Attempt states in which an execution may be live in a cloud.
LIVE_ATTEMPT_STATES = ("created", "starting", "running")
# A Runner silent for this many heartbeat intervals is "overdue" (the UNKNOWN deadline comes later).
OVERDUE_HEARTBEATS = 3


@dataclass
class ConnectionFigures:
    cloud_id: str
    tasks_by_state: dict[str, int] = field(default_factory=dict)
    queue_length: int = 0
    queue_oldest_seconds: float = 0.0
    active_attempts: int = 0
    heartbeats_overdue: int = 0


def connection_figures(now: dt.datetime | None = None) -> dict[int, ConnectionFigures]:
    """Tasks by state, queue length and oldest wait, live attempts and overdue Runners, per connection id."""
    from tasks.models import Attempt, Task

    now = now or timezone.now()
    out = {pk: ConnectionFigures(cloud_id) for pk, cloud_id in CloudConnection.objects.values_list("pk", "cloud_id")}
    by_state = Task.objects.order_by().values_list("connection_id", "state").annotate(n=Count("id"))
    for connection_id, state, n in by_state:
        if connection_id in out:
            out[connection_id].tasks_by_state[state] = n
            if state == "PENDING":
                out[connection_id].queue_length = n
    waiting = Task.objects.filter(state="PENDING").order_by().values_list("connection_id")
    for connection_id, oldest in waiting.annotate(oldest=Min("created_at")):
        if connection_id in out:
            out[connection_id].queue_oldest_seconds = max(0.0, (now - oldest).total_seconds())
    live = Attempt.objects.filter(state__in=LIVE_ATTEMPT_STATES, closed_at__isnull=True).order_by()
    for connection_id, n in live.values_list("task__connection_id").annotate(n=Count("id")):
        if connection_id in out:
            out[connection_id].active_attempts = n
    silent_since = now - dt.timedelta(seconds=settings.RUNNER_HEARTBEAT_SECONDS * OVERDUE_HEARTBEATS)
    overdue = live.filter(runner_contact_at__isnull=False).annotate(
        last_sign=Coalesce("last_heartbeat_at", "runner_contact_at")
    )
    overdue = overdue.filter(last_sign__lt=silent_since)
    for connection_id, n in overdue.values_list("task__connection_id").annotate(n=Count("id")):
        if connection_id in out:
            out[connection_id].heartbeats_overdue = n
    return out


def queue_waits(since: dt.datetime) -> dict[int, list[float]]:
    """Seconds each task admitted since `since` waited in the queue (PENDING), per connection id.

    The wait runs from the task's last entry into PENDING (its creation, or a user's retry) to its
    admission (the PENDING → SUBMITTING state event).
    """
    from tasks.models import TaskEvent

    entered = TaskEvent.objects.filter(
        task_id=OuterRef("task_id"), type="state", data__to="PENDING", seq__lt=OuterRef("seq")
    ).order_by("-seq")
    admissions = (
        TaskEvent.objects.filter(type="state", data__from="PENDING", data__to="SUBMITTING", created_at__gte=since)
        .order_by()
        .annotate(entered=Coalesce(Subquery(entered.values("created_at")[:1]), F("task__created_at")))
        .values_list("task__connection_id", "created_at", "entered")
    )
    out: dict[int, list[float]] = defaultdict(list)
    for connection_id, admitted, entered_at in admissions:
        out[connection_id].append(max(0.0, (admitted - entered_at).total_seconds()))
    return dict(out)


@dataclass(frozen=True)
class QuotaFigure:
    project: str
    cloud_id: str  # "" for a project-wide quota
    resource: str  # tasks, vcpu, memory_mb, gpus
    used: float
    limit: float | None


def quota_figures() -> list[QuotaFigure]:
    """Use against limit for every quota set, and the use of every project holding resources anywhere.

    One pass over the holding tasks (the same arithmetic as admission, cloudpivot.accounts.quotas).
    """
    from tasks.choices import HOLDS_QUOTA
    from tasks.models import Task

    used: dict[tuple[int, int | None], Footprint] = defaultdict(Footprint)
    slugs: dict[int, str] = {}
    holding = Task.objects.filter(state__in=HOLDS_QUOTA).order_by()
    for project_id, slug, connection_id, spec in holding.values_list(
        "project_id", "project__slug", "connection_id", "normalized"
    ):
        footprint = task_footprint(spec)
        slugs[project_id] = slug
        used[(project_id, connection_id)] += footprint
        used[(project_id, None)] += footprint
    cloud_ids = dict(CloudConnection.objects.values_list("pk", "cloud_id"))
    limits: dict[tuple[int, int | None], Quota] = {}
    for quota in Quota.objects.select_related("project"):
        limits[(quota.project_id, quota.connection_id)] = quota
        slugs[quota.project_id] = quota.project.slug
    out = []
    for key in sorted(set(used) | set(limits), key=lambda k: (slugs[k[0]], k[1] or 0)):
        project_id, connection_id = key
        footprint, quota = used.get(key, Footprint()), limits.get(key)
        for limit_field, amount_field, _, _ in LIMITS:
            limit = getattr(quota, limit_field) if quota else None
            out.append(
                QuotaFigure(
                    project=slugs[project_id],
                    cloud_id=cloud_ids.get(connection_id, "") if connection_id else "",
                    resource=amount_field,
                    used=float(getattr(footprint, amount_field)),
                    limit=float(limit) if isinstance(limit, int | Decimal) else None,
                )
            )
    return out
