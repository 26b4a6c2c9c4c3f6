"""The dashboard's quota card: each quota of the user's projects, with what is in use against each limit set.

Use is counted the way admission counts it: tasks by tasks.selectors.task_quota_usage (admitted, unfinished
tasks), instances by resources.quotas.instance_usage (instances holding quota). A limit of vCPU or memory
holds tasks and instances together (accounts.quotas.shared_usage), so its bar shows both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, OuterRef, QuerySet

from cloudpivot.accounts.models import Project, Quota
from cloudpivot.accounts.selectors import projects_visible_to
from resources.quotas import instance_usage
from tasks.selectors import task_quota_usage

# (label, quota field, what holds it: "tasks", "instances" or "both" (task and instance fields), unit)
BARS = [
    ("Tasks", "max_tasks", "tasks", ("tasks",), ""),
    ("vCPU (tasks and instances)", "max_vcpu", "both", ("vcpu", "vcpus"), ""),
    ("Memory (tasks and instances)", "max_memory_mb", "both", ("memory_mb", "memory_mb"), "MB"),
    ("GPUs", "max_gpus", "tasks", ("gpus",), ""),
    ("Instances", "max_instances", "instances", ("instances",), ""),
    ("Instance disks and volumes", "max_volume_gb", "instances", ("volume_gb",), "GB"),
]


LIMIT_FIELDS = [limit_field for _, limit_field, *_ in BARS]


@dataclass
class QuotaBar:
    label: str
    used: str
    limit: str
    unit: str
    percent: int  # of the limit in use, 0–100 (a limit of 0 counts as full); 0 when there is no limit


@dataclass
class QuotaCard:
    project: str
    scope: str  # "all clouds" or the cloud id
    bars: list[QuotaBar] = field(default_factory=list)
    limited: bool = True  # False: a project with no limit set, its use shown without bars


def _amount(value) -> str:
    return f"{Decimal(str(value)).normalize():f}"


def quota_cards(*, user: AbstractBaseUser) -> list[QuotaCard]:
    """One card per quota of a project the user sees, with a bar per limit that is set."""
    return _cards(Quota.objects.filter(project__in=projects_visible_to(user=user)))


def project_quota_cards(*, project: Project) -> list[QuotaCard]:
    """The project page's cards: each quota of this one project (the caller checked the user may see it)."""
    return _cards(Quota.objects.filter(project=project))


def _cards(quotas: QuerySet[Quota]) -> list[QuotaCard]:
    rows = quotas.select_related("project", "connection")
    cards = []
    for quota in rows.order_by("project__slug", "connection__cloud_id"):
        scope = quota.connection.cloud_id if quota.connection_id else "all clouds"
        card = QuotaCard(project=quota.project.slug, scope=scope)
        use = {}
        for label, limit_field, kind, amount_fields, unit in BARS:
            limit = getattr(quota, limit_field)
            if limit is None:
                continue
            holders = ("tasks", "instances") if kind == "both" else (kind,)
            for holder in holders:
                if holder not in use:
                    count = task_quota_usage if holder == "tasks" else instance_usage
                    use[holder] = count(project_id=quota.project_id, connection_id=quota.connection_id)
            used = sum(
                (Decimal(str(getattr(use[h], f))) for h, f in zip(holders, amount_fields, strict=True)), Decimal(0)
            )
            percent = 100 if not limit else min(100, round(100 * Decimal(str(used)) / Decimal(str(limit))))
            card.bars.append(QuotaBar(label, _amount(used), _amount(limit), unit, percent))
        if card.bars:
            cards.append(card)
    return cards


# What a project without limits shows: the same amounts, from the same counters, with no bar.
USAGE_ROWS = [
    ("Tasks", "tasks", ("tasks",), ""),
    ("vCPU (tasks and instances)", "both", ("vcpu", "vcpus"), ""),
    ("Memory (tasks and instances)", "both", ("memory_mb", "memory_mb"), "MB"),
    ("GPUs", "tasks", ("gpus",), ""),
    ("Instances", "instances", ("instances",), ""),
]


def usage_cards(*, user: AbstractBaseUser) -> list[QuotaCard]:
    """The dashboard's cards for the user's own projects that have no limit set: what each holds now.

    Without them a project with no quota showed nothing at all ("No quotas set"), however much it used.
    Only the user's memberships count (platform staff see every project, which would be a query pair each).
    """
    limited = Quota.objects.filter(project=OuterRef("pk")).exclude(**dict.fromkeys(LIMIT_FIELDS)).values("pk")
    projects = Project.objects.filter(memberships__user=user).exclude(Exists(limited)).order_by("slug")
    return [project_usage_card(project=project) for project in projects]


def project_usage_card(*, project: Project) -> QuotaCard:
    use = {
        "tasks": task_quota_usage(project_id=project.pk, connection_id=None),
        "instances": instance_usage(project_id=project.pk, connection_id=None),
    }
    card = QuotaCard(project=project.slug, scope="all clouds", limited=False)
    for label, kind, amount_fields, unit in USAGE_ROWS:
        holders = ("tasks", "instances") if kind == "both" else (kind,)
        used = sum((Decimal(str(getattr(use[h], f))) for h, f in zip(holders, amount_fields, strict=True)), Decimal(0))
        card.bars.append(QuotaBar(label, _amount(used), "", unit, 0))
    return card
