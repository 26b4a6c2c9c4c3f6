"""Quota arithmetic: what a task asks for, and which limit holds a task back.

Admission is a queue, not a wall (DESIGN §2): a task that does not fit now waits with the
reason; a task that could never fit is refused at submission. accounts is the lowest app, so what
a project's tasks hold now is counted by tasks (tasks.selectors.task_quota_usage), not here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Q

from cloudpivot.accounts.models import Project, Quota
from cloudpivot.exceptions import QuotaExceeded
from cloudpivot.recent import Recent


@dataclass
class Footprint:
    tasks: int = 0
    vcpu: Decimal = Decimal(0)
    memory_mb: int = 0
    gpus: int = 0

    def __add__(self, other: Footprint) -> Footprint:
        return Footprint(
            self.tasks + other.tasks, self.vcpu + other.vcpu, self.memory_mb + other.memory_mb, self.gpus + other.gpus
        )


# (quota field, footprint field, words, spec field path)
LIMITS = [
    ("max_tasks", "tasks", "tasks", ""),
    ("max_vcpu", "vcpu", "vCPU", "resources.cpu"),
    ("max_memory_mb", "memory_mb", "MB memory", "resources.memory_mb"),
    ("max_gpus", "gpus", "GPUs", "resources.gpu"),
]


def task_footprint(spec: dict[str, Any]) -> Footprint:
    """What one task counts against quotas: itself, its CPUs (1 if unsaid), memory and GPUs.

    The submission fills `resources` in with what the cloud really gives the task (a Kubernetes connection's
    default requests, an OpenStack flavor's size: clusters.task_checks), so these are its real amounts.
    """
    resources = spec.get("resources") or {}
    return Footprint(
        tasks=1,
        vcpu=Decimal(str(resources.get("cpu") or 1)),
        memory_mb=int(resources.get("memory_mb") or 0),
        gpus=int(resources.get("gpu") or 0),
    )


# Tasks and instances share a project's vCPU and memory limits. accounts counts neither (it is the lowest
# app): each app that holds vCPU and memory hands in its counter when Django starts (its apps.py), and
# each side's check adds what the others hold.
UsageCounter = Callable[..., Footprint]  # (project_id=, connection_id=) → what that kind holds
_usage_counters: dict[str, UsageCounter] = {}


def register_usage(kind: str, counter: UsageCounter) -> None:
    """Called once per holder kind ("tasks", "instances") from its AppConfig.ready()."""
    _usage_counters[kind] = counter


def shared_usage(*, project_id: int, connection_id: int | None, besides: str) -> Footprint:
    """The vCPU and memory the project holds through every kind but `besides` (on one connection, or on all)."""
    total = Footprint()
    for kind, counter in _usage_counters.items():
        if kind != besides:
            used = counter(project_id=project_id, connection_id=connection_id)
            total = total + Footprint(vcpu=Decimal(str(used.vcpu)), memory_mb=int(used.memory_mb))
    return total


# Holds on a whole project beside its quotas (a monthly budget spent, usage/budgets.py), registered the same way.
AdmissionHold = Callable[[list[int]], dict[int, str]]  # project ids → {project id: the reason, in words}
_admission_holds: list[AdmissionHold] = []


def register_admission_hold(hold: AdmissionHold) -> None:
    if hold not in _admission_holds:
        _admission_holds.append(hold)


def admission_holds(project_ids: list[int]) -> dict[int, str]:
    """Projects that may not admit now, with the reason: one question per registered hold per admission pass."""
    held: dict[int, str] = {}
    for hold in _admission_holds:
        for project_id, reason in hold(project_ids).items():
            held.setdefault(project_id, reason)
    return held


def quotas_for(*, project_id: int, connection_id: int) -> list[Quota]:
    """The project-wide quota and the one for this connection, where set."""
    return list(
        Quota.objects.filter(
            Q(connection__isnull=True) | Q(connection_id=connection_id), project_id=project_id
        ).select_related("connection")
    )


def _amount(value: Any) -> str:
    """4, 0.5, 2048: no trailing zeros."""
    return f"{Decimal(str(value)).normalize():f}"


def quota_scope(quota: Quota) -> str:
    """Where a quota holds, in words for messages: "on kube-a" or "on all clouds"."""
    return f"on {quota.connection.cloud_id}" if quota.connection_id else "on all clouds"


_recent_quotas = Recent()


def check_can_ever_fit(*, project: Project, connection_id: int, footprint: Footprint) -> None:
    """Refuse at submission what asks more than a whole quota: it would wait forever.

    On a submit's hot path: one plain query for the project's few quotas, without quotas_for's join and
    OR, its answer kept for a second (cloudpivot/recent.py; admission checks the database again); the
    connection's name is read only to word a refusal.
    """
    for quota in _recent_quotas.get(project.pk, lambda: tuple(Quota.objects.filter(project_id=project.pk))):
        if quota.connection_id not in (None, connection_id):
            continue
        for limit_field, amount_field, words, field in LIMITS:
            limit, asked = getattr(quota, limit_field), getattr(footprint, amount_field)
            if limit is not None and asked > limit:
                asked, limit = _amount(asked), _amount(limit)
                message = (
                    f"the task asks {asked} {words} but project {project.slug}'s quota {quota_scope(quota)} "
                    f"allows at most {limit}"
                )
                raise QuotaExceeded(
                    message,
                    errors=[{"field": field, "message": message}],
                    extra={"resource": amount_field, "asked": asked, "limit": limit},
                )


def blocking_limit(
    quotas: list[Quota], used: dict[int | None, Footprint], footprint: Footprint, project: Project
) -> str:
    """Words for the first limit this task would break now ("" if it fits). `used` is keyed by connection id."""
    for quota in quotas:
        held = used[quota.connection_id]
        for limit_field, amount_field, words, _ in LIMITS:
            limit = getattr(quota, limit_field)
            if limit is not None and getattr(held, amount_field) + getattr(footprint, amount_field) > limit:
                return (
                    f"waiting: project {project.slug} quota {quota_scope(quota)}: "
                    f"{_amount(getattr(held, amount_field))}/{_amount(limit)} {words} in use"
                )
    return ""
