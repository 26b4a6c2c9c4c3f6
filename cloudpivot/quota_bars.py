"""The dashboard's quota card: each quota of the user's projects, with what is in use against each limit set.

Use is counted the way admission counts it: tasks by tasks.selectors.task_quota_usage (admitted, unfinished
tasks), instances by resources.quotas.instance_usage (instances holding quota). A limit of vCPU or memory
holds tasks and instances each on its own, so each gets its own bar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser

from cloudpivot.accounts.models import Quota
from cloudpivot.accounts.selectors import projects_visible_to
from resources.quotas import instance_usage
from tasks.selectors import task_quota_usage

# (label, quota field, "tasks" or "instances", footprint field, unit)
BARS = [
    ("Tasks", "max_tasks", "tasks", "tasks", ""),
    ("Task vCPU", "max_vcpu", "tasks", "vcpu", ""),
    ("Task memory", "max_memory_mb", "tasks", "memory_mb", "MB"),
    ("GPUs", "max_gpus", "tasks", "gpus", ""),
    ("Instances", "max_instances", "instances", "instances", ""),
    ("Instance vCPU", "max_vcpu", "instances", "vcpus", ""),
    ("Instance memory", "max_memory_mb", "instances", "memory_mb", "MB"),
    ("Instance disks", "max_volume_gb", "instances", "volume_gb", "GB"),
]


@dataclass
class QuotaBar:
    label: str
    used: str
    limit: str
    unit: str
    percent: int  # of the limit in use, 0–100 (a limit of 0 counts as full)


@dataclass
class QuotaCard:
    project: str
    scope: str  # "all clouds" or the cloud id
    bars: list[QuotaBar] = field(default_factory=list)


def _amount(value) -> str:
    return f"{Decimal(str(value)).normalize():f}"


def quota_cards(*, user: AbstractBaseUser) -> list[QuotaCard]:
    """One card per quota of a project the user sees, with a bar per limit that is set."""
    rows = Quota.objects.filter(project__in=projects_visible_to(user=user)).select_related("project", "connection")
    cards = []
    for quota in rows.order_by("project__slug", "connection__cloud_id"):
        scope = quota.connection.cloud_id if quota.connection_id else "all clouds"
        card = QuotaCard(project=quota.project.slug, scope=scope)
        use = {}
        for label, limit_field, kind, amount_field, unit in BARS:
            limit = getattr(quota, limit_field)
            if limit is None:
                continue
            if kind not in use:
                count = task_quota_usage if kind == "tasks" else instance_usage
                use[kind] = count(project_id=quota.project_id, connection_id=quota.connection_id)
            used = getattr(use[kind], amount_field)
            percent = 100 if not limit else min(100, round(100 * Decimal(str(used)) / Decimal(str(limit))))
            card.bars.append(QuotaBar(label, _amount(used), _amount(limit), unit, percent))
        if card.bars:
            cards.append(card)
    return cards
