from django.contrib import admin

from usage.budgets import budget_sweep_one
from usage.models import ProjectBudget


@admin.register(ProjectBudget)
class ProjectBudgetAdmin(admin.ModelAdmin):
    list_display = ["project", "core_hours", "hard_stop", "held_reason", "updated_at"]
    readonly_fields = ["held_reason"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        budget_sweep_one(obj)  # a raised budget releases held tasks now, not at the next sweep
