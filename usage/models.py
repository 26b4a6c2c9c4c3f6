"""A project's monthly budget. Usage itself is not stored: it is read from attempts and instances
(usage/accounting.py), so it can never disagree with what ran."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models

from cloudpivot.accounts.models import Project
from cloudpivot.common import BaseModel


class ProjectBudget(BaseModel):
    """Core-hours a project may use per calendar month (UTC), set by platform admins in the admin."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="budget")
    core_hours = models.DecimalField(
        max_digits=12, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))], help_text="Per month."
    )
    hard_stop = models.BooleanField(
        default=False, help_text="At 100 %, hold new admissions (running tasks go on) until the budget is raised."
    )
    held_reason = models.TextField(
        blank=True, editable=False, help_text="Set by the budget sweep while the hard stop holds admissions."
    )

    def __str__(self) -> str:
        return f"{self.project.slug}: {self.core_hours} core-hours a month"
