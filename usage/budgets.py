"""Monthly budgets: where a project stands, the 80 % warning, and the hard stop at 100 %.

A sweep (every minute, and at once when an admin saves a budget) reads each budgeted project's month so far.
At 80 % and at 100 % it writes one feed entry per month (`project.budget_warning`, `project.budget_exhausted`),
which webhooks push like any other event and the notifications pump mails to the project's admins
(notifications/mail.py). With `hard_stop`, a project at 100 % gets a `held_reason`; the
admission pass reads that reason (budget_holds) and leaves the project's PENDING tasks waiting with it. Tasks
already running go on. The sweep clears the hold when the budget is raised or the month turns over.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from notifications.capture import feed_announce_once
from tasks.services.admission import admission_wake
from usage.accounting import MONTH_FORMAT, core_hours, core_hours_by_day, month_bounds, spans
from usage.models import ProjectBudget

WARN_AT = Decimal(80)


@dataclass
class BudgetStatus:
    month: str
    budget: Decimal
    used: Decimal
    hard_stop: bool
    held_reason: str
    burn: list[tuple[dt.date, Decimal]]  # cumulative core-hours at the end of each day so far

    @property
    def percent(self) -> Decimal:
        return (self.used * 100 / self.budget).quantize(Decimal("0.1")) if self.budget else Decimal(0)

    @property
    def state(self) -> str:
        return "exhausted" if self.percent >= 100 else "warning" if self.percent >= WARN_AT else "ok"

    @property
    def remaining(self) -> Decimal:
        return max(self.budget - self.used, Decimal(0)).quantize(Decimal("0.01"))


def budget_status(budget: ProjectBudget, month: str | None = None) -> BudgetStatus:
    start, end = month_bounds(month)
    found = spans(start=start, end=end, project_ids=[budget.project_id])
    return BudgetStatus(
        month=start.strftime(MONTH_FORMAT),
        budget=budget.core_hours,
        used=core_hours(found, start=start, end=end).quantize(Decimal("0.01")),
        hard_stop=budget.hard_stop,
        held_reason=budget.held_reason,
        burn=core_hours_by_day(found, start=start, end=end),
    )


def budget_sweep() -> str:
    """The scheduled job: every budget's warnings and hold brought up to date."""
    budgets = list(ProjectBudget.objects.select_related("project"))
    changed = sum(budget_sweep_one(budget) for budget in budgets)
    return f"{len(budgets)} budgets read, {changed} holds changed"


def budget_sweep_one(budget: ProjectBudget) -> bool:
    """One project's month so far: feed entries on crossing 80 % and 100 %, the hold set or cleared.
    Returns whether the hold changed."""
    status = budget_status(budget)
    slug = budget.project.slug
    words = f"project {slug} has used {status.used} of its {status.budget} core-hour budget for {status.month}"
    for threshold, kind in ((WARN_AT, "budget_warning"), (Decimal(100), "budget_exhausted")):
        if status.percent >= threshold:
            _announce_once(budget, status, kind, f"{words} ({status.percent} %)")
    held = f"waiting: {words} (hard stop)" if budget.hard_stop and status.state == "exhausted" else ""
    if held == budget.held_reason:
        return False
    ProjectBudget.objects.filter(pk=budget.pk).update(held_reason=held)
    budget.held_reason = held
    if not held:
        admission_wake()  # its waiting tasks may start now
    return True


def budget_holds(project_ids: list[int]) -> dict[int, str]:
    """Why each of these projects may not admit now (only those held): read by every admission pass."""
    return dict(
        ProjectBudget.objects.filter(project_id__in=project_ids, hard_stop=True)
        .exclude(held_reason="")
        .values_list("project_id", "held_reason")
    )


def _announce_once(budget: ProjectBudget, status: BudgetStatus, kind: str, message: str) -> None:
    """One feed entry per project, month and threshold: `source` is unique, so a second sweep adds nothing."""
    feed_announce_once(
        type=f"project.{kind}",
        project_id=budget.project_id,
        message=message,
        data={
            "month": status.month,
            "budget_core_hours": str(status.budget),
            "used_core_hours": str(status.used),
            "percent": str(status.percent),
            "hard_stop": status.hard_stop,
        },
        source=f"budget:{budget.project_id}:{status.month}:{kind}",
    )
