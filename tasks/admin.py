"""Operators' view of tasks. State fields are read-only: actions call the same services as the API."""

from django.contrib import admin, messages
from django_q.models import Failure, OrmQ, Schedule, Success

from cloudpivot.exceptions import ApplicationError
from tasks import services
from tasks.choices import TERMINAL, CleanupState
from tasks.models import Attempt, Task, TaskEvent


def deletable(queryset):
    """Ended tasks whose attempts left nothing in a cloud: deleting any other row would leave its program, pod or
    server running with nobody to stop or clean it up (cancel it first)."""
    return queryset.filter(state__in=TERMINAL).exclude(attempts__cleanup_state=CleanupState.PENDING)


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

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and not deletable(Task.objects.filter(pk=obj.pk)).exists():
            return False
        return super().has_delete_permission(request, obj)

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


# ---------------------------------------------------------------------------- django-q2's own models
# A schedule names any importable callable with any arguments, and a queued job's payload is one: whoever may
# write them can run code as the server. So only superusers change them (docs/security.md); staff may look.
def _superuser_writes_only(admin_class: type[admin.ModelAdmin]) -> type[admin.ModelAdmin]:
    class SuperuserWritesOnly(admin_class):
        def has_add_permission(self, request, *args) -> bool:
            return request.user.is_superuser and super().has_add_permission(request, *args)

        def has_change_permission(self, request, obj=None) -> bool:
            return request.user.is_superuser and super().has_change_permission(request, obj)

        def has_delete_permission(self, request, obj=None) -> bool:
            return request.user.is_superuser and super().has_delete_permission(request, obj)

        def get_actions(self, request):
            return super().get_actions(request) if request.user.is_superuser else {}

    SuperuserWritesOnly.__name__ = SuperuserWritesOnly.__qualname__ = f"SuperuserWritesOnly{admin_class.__name__}"
    return SuperuserWritesOnly


for _model in (Schedule, Failure, Success, OrmQ):
    if admin.site.is_registered(_model):
        _registered = type(admin.site.get_model_admin(_model))
        admin.site.unregister(_model)
        admin.site.register(_model, _superuser_writes_only(_registered))
