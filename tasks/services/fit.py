"""Will it fit? A task document's verdict before it is submitted (`POST /api/v1/tasks?dry_run=true`, the
submit form): it starts now, waits (behind how many, held by which limit) or never fits.

The document goes through the submission's own checks (a bad one is the same 400), then, in order:
1. never fits: a CloudPivot quota smaller than the task (what the submission refuses), then the cloud's
   own ceilings (clusters.fit.cloud_limits: a ResourceQuota's hard, a LimitRange max, the largest node,
   the OpenStack quota, the largest compute host);
2. waits: the connection's dispatch switch is off or the project is held (a budget's hard stop); then
   admission played without locks, as connection_admit would run it now: the connection's limit
   on running tasks, then the project's quotas after the project's own PENDING tasks ahead (first in,
   first admitted), then the cloud's room left now (a ResourceQuota or OpenStack quota in use);
3. otherwise it starts now. Nothing is written.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from cloudpivot.accounts import quotas
from cloudpivot.accounts.models import Project, Quota
from clusters import fit
from clusters.backends.base import FitLimit
from clusters.models import CloudConnection
from tasks.choices import HOLDS_QUOTA, TaskState
from tasks.models import Task
from tasks.selectors import task_quota_usage
from tasks.services.admission import PER_PROJECT_LIMIT
from tasks.services.submission import task_document_check

# CloudPivot's footprint fields → the verdict's resource names
RESOURCES = {"tasks": "tasks", "vcpu": "cpu", "memory_mb": "memory_mb", "gpus": "gpu"}
_FIELDS = {resource: field for field, resource in RESOURCES.items()}


def task_fit(*, user: AbstractBaseUser, document: Any) -> fit.Verdict:
    spec, connection, project = task_document_check(user=user, document=document)
    footprint = quotas.task_footprint(spec)
    rows = quotas.quotas_for(project_id=project.pk, connection_id=connection.pk)
    never = _quota_never(rows, project, footprint)
    if never:
        return fit.never_fits(never)
    resources = spec.get("resources") or {}
    asked = {key: resources.get(key) for key in ("cpu", "memory_mb", "gpu")}
    asked["node_selector"] = spec.get("node_selector") or {}
    cloud, notes = fit.cloud_limits(connection, asked)
    never = fit.first_never(cloud)
    if never:
        return fit.never_fits(never, notes=notes)
    pending = Task.objects.filter(connection=connection, state=TaskState.PENDING)
    ahead = pending.count()
    switch = _not_admitting(connection, project)
    if switch:
        return fit.held(switch, ahead=ahead, notes=notes)
    held = _connection_full(connection, ahead) or _quota_held(rows, project, connection, footprint)
    held = held or fit.first_not_now(cloud)
    if held:
        return fit.waits(held, ahead=ahead, notes=notes)
    return fit.starts_now(notes=notes)


def _not_admitting(connection: CloudConnection, project: Project) -> str:
    """What stops admission whatever the resources: the connection's dispatch switch, a project's hold (a
    budget's hard stop), as connection_admit reads them."""
    if not connection.dispatch_enabled:
        return f"dispatch is off on the {connection.cloud_id} cloud; tasks wait until an admin turns it on"
    return quotas.admission_holds([project.pk]).get(project.pk, "").removeprefix("waiting: ")


def _source(quota: Quota, project: Project) -> str:
    return f"project {project.slug}'s quota {quotas.quota_scope(quota)}"


def _quota_never(rows: list[Quota], project: Project, footprint: quotas.Footprint) -> FitLimit | None:
    for quota in rows:
        for limit_field, amount_field, _, _ in quotas.LIMITS:
            most, asked = getattr(quota, limit_field), getattr(footprint, amount_field)
            if most is not None and asked > most:
                return FitLimit(RESOURCES[amount_field], float(asked), None, float(most), _source(quota, project))
    return None


def _connection_full(connection: CloudConnection, ahead: int) -> FitLimit | None:
    """The connection's limit on running tasks, with every PENDING task ahead admitted first."""
    most = connection.max_active_tasks
    if not most:
        return None
    active = Task.objects.filter(connection=connection, state__in=HOLDS_QUOTA).count()
    if active + ahead < most:
        return None
    source = f"the {connection.cloud_id} cloud's limit on running tasks"
    return FitLimit("active_tasks", 1, float(max(most - active, 0)), float(most), source)


def _quota_held(
    rows: list[Quota], project: Project, connection: CloudConnection, footprint: quotas.Footprint
) -> FitLimit | None:
    """Admission's ledger for the project, its PENDING tasks ahead taken first while they fit; the first limit
    that holds the new task (or one ahead of it: then every later task of the project waits too)."""
    if not rows:
        return None
    used = {
        quota.connection_id: task_quota_usage(project_id=project.pk, connection_id=quota.connection_id)
        + quotas.shared_usage(project_id=project.pk, connection_id=quota.connection_id, besides="tasks")
        for quota in rows
    }
    ahead = (
        Task.objects.filter(connection=connection, project=project, state=TaskState.PENDING)
        .order_by("created_at", "id")
        .values_list("normalized", flat=True)[:PER_PROJECT_LIMIT]
    )
    for task_footprint in [*(quotas.task_footprint(spec) for spec in ahead), footprint]:
        held = _first_full(rows, used, task_footprint, project)
        if held:  # named with what the new task asks, even when a task ahead of it is the one held
            return replace(held, requested=float(getattr(footprint, _FIELDS[held.resource])))
        used = {key: value + task_footprint for key, value in used.items()}
    return None


def _first_full(rows: list[Quota], used: dict, footprint: quotas.Footprint, project: Project) -> FitLimit | None:
    for quota in rows:
        held = used[quota.connection_id]
        for limit_field, amount_field, _, _ in quotas.LIMITS:
            most, asked = getattr(quota, limit_field), getattr(footprint, amount_field)
            if most is not None and getattr(held, amount_field) + asked > most:
                free = max(float(most) - float(getattr(held, amount_field)), 0.0)
                return FitLimit(RESOURCES[amount_field], float(asked), free, float(most), _source(quota, project))
    return None
