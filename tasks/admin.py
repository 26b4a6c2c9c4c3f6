"""Operators' view of tasks. State fields are read-only: actions call the same services as the API."""

from django.contrib import admin, messages

from cloudpivot.exceptions import ApplicationError
from tasks import services
from tasks.models import Attempt, Task, TaskEvent


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    fields = [
        "number",
        "external_name",
        "state",
        "exit_code",
        "exit_signal",
        "failure_reason",
        "cleanup_state",
        "program_started_at",
        "finished_at",
    ]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class TaskEventInline(admin.TabularInline):
    model = TaskEvent
    extra = 0
    can_delete = False
    fields = ["seq", "type", "message", "created_at"]
    readonly_fields = fields
    ordering = ["-seq"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["short_id", "name", "state", "connection", "project", "owner", "attempts_count", "created_at"]
    list_filter = ["state", "connection", "project"]
    search_fields = ["id", "name", "owner__username"]
    list_select_related = ["connection", "project", "owner"]
    raw_id_fields = ["owner"]
    readonly_fields = [
        "id",
        "project",
        "connection",
        "backend",
        "spec",
        "spec_sha256",
        "normalized",
        "idempotency_key",
        "state",
        "state_reason",
        "state_changed_at",
        "last_event_seq",
        "retry_limit",
        "timeout_seconds",
        "attempts_count",
        "failed_attempts",
        "started_at",
        "finished_at",
        "next_attempt_at",
        "exit_code",
        "result",
        "created_at",
    ]
    inlines = [AttemptInline, TaskEventInline]
    actions = ["cancel", "retry"]

    def has_add_permission(self, request) -> bool:
        return False

    def _apply(self, request, queryset, service, verb: str) -> None:
        done = 0
        for task in queryset:
            try:
                service(task_id=task.pk, user=request.user)
                done += 1
            except ApplicationError as exc:
                self.message_user(request, f"{task.short_id}: {exc.message}", messages.WARNING)
        self.message_user(request, f"{verb} {done} tasks.", messages.SUCCESS)

    def save_model(self, request, obj, form, change) -> None:
        """Only the owner is editable here, and it changes through the service (checked, and in the history)."""
        if change and "owner" in form.changed_data:
            try:
                services.task_change_owner(task_id=obj.pk, new_owner=form.cleaned_data["owner"], actor=request.user)
            except ApplicationError as exc:
                self.message_user(request, exc.message, messages.ERROR)

    @admin.action(description="Cancel the selected tasks")
    def cancel(self, request, queryset):
        self._apply(request, queryset, services.task_cancel, "Cancelled")

    @admin.action(description="Retry the selected tasks")
    def retry(self, request, queryset):
        self._apply(request, queryset, services.task_retry, "Retried")
