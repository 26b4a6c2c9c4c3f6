"""Operators' view of task sets: read-only, with each set's progress. Acting on a set goes through the API, the CLI
(`cloudpivot set cancel`, `retry-failed`) or the admin of its element tasks, whose actions call the task services.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList

from tasksets.models import TaskSet
from tasksets.selectors import WAITING, taskset_counts


class _ChangeListWithCounts(ChangeList):
    """The page's sets with their counts by state, in one query for the page (tasksets.selectors.taskset_counts),
    not one per row. The template iterates the same (now cached) rows."""

    def get_results(self, request) -> None:
        super().get_results(request)
        rows = list(self.result_list)
        counts = taskset_counts(task_sets=rows) if rows else {}
        for row in rows:
            row.admin_counts = counts.get(row.pk, {})


def progress_words(counts: dict[str, int]) -> str:
    """`120 waiting, 10 running, 70 succeeded`: the counts that are not 0, waiting first, then by state."""
    names = [WAITING, *sorted(name for name in counts if name != WAITING)]
    return ", ".join(f"{counts[name]} {name}" for name in names if counts.get(name)) or "no elements"


@admin.register(TaskSet)
class TaskSetAdmin(admin.ModelAdmin):
    list_display = [
        "short_id",
        "name",
        "state",
        "project",
        "owner",
        "connection",
        "total",
        "materialized",
        "max_running",
        "progress",
        "created_at",
    ]
    list_filter = ["state", "connection", "project"]
    search_fields = ["id", "name", "owner__username"]
    list_select_related = ["connection", "project", "owner"]
    list_per_page = 50
    ordering = ["-created_at", "-id"]
    # `items` can be megabytes (one object per element), and a set up to 100,000 elements: the page shows the
    # template and the counts, not the items nor an inline of elements (each is a Task in the tasks admin).
    exclude = ["items"]
    readonly_fields = [
        "id",
        "name",
        "project",
        "owner",
        "connection",
        "state",
        "state_reason",
        "progress",
        "total",
        "count",
        "materialized",
        "max_running",
        "template",
        "idempotency_key",
        "request_sha256",
        "state_changed_at",
        "finished_at",
        "ended_at",
        "created_at",
        "updated_at",
    ]

    def get_changelist(self, request, **kwargs):
        return _ChangeListWithCounts

    def get_queryset(self, request):
        return super().get_queryset(request).defer("items")

    @admin.display(description="progress")
    def progress(self, task_set: TaskSet) -> str:
        counts = getattr(task_set, "admin_counts", None)
        if counts is None:  # the change page: one set
            counts = taskset_counts(task_sets=[task_set])[task_set.pk]
        return progress_words(counts)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
