"""django-q2 job of budgets (the schedule is in cloudpivot/schedules.py)."""

from __future__ import annotations

from usage.budgets import budget_sweep


def sweep() -> str:
    return budget_sweep()
