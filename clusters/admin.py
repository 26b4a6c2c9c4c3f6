from django.contrib import admin, messages

from clusters.health import connections_check
from clusters.models import CloudConnection, MetricSample


@admin.register(CloudConnection)
class CloudConnectionAdmin(admin.ModelAdmin):
    list_display = [
        "cloud_id",
        "backend",
        "dispatch_enabled",
        "max_active_tasks",
        "health_status",
        "health_message",
        "health_checked_at",
    ]
    list_filter = ["backend", "dispatch_enabled", "health_status"]
    search_fields = ["cloud_id", "name", "endpoint"]
    filter_horizontal = ["projects"]
    readonly_fields = ["health_status", "health_message", "health_checked_at", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["cloud_id", "name", "backend", "dispatch_enabled", "max_active_tasks", "projects"]}),
        (
            "Where and how",
            {
                "fields": ["endpoint", "scope", "credentials_ref", "options"],
                "description": "Credentials are referenced (a file path, or env:NAME), never stored here.",
            },
        ),
        ("Health", {"fields": ["health_status", "health_message", "health_checked_at"]}),
    ]
    actions = ["test_connection"]

    @admin.action(description="Test connection (run its checks now)", permissions=["change"])
    def test_connection(self, request, queryset) -> None:
        """The checks of the scheduled health job, now, one message per connection with what is wrong."""
        for cloud_id, report in sorted(connections_check(queryset).items()):
            if report.ok:
                self.message_user(request, f"{cloud_id}: OK: {report.summary}", messages.SUCCESS)
            else:
                self.message_user(request, f"{cloud_id}: failing: {report.summary}", messages.ERROR)


@admin.register(MetricSample)
class MetricSampleAdmin(admin.ModelAdmin):
    """Read-only: samples are written by the sampling and downsampling jobs only."""

    list_display = ["timestamp", "connection", "subject_kind", "subject_key", "metric", "value", "resolution"]
    list_filter = ["resolution", "subject_kind", "connection"]
    search_fields = ["subject_key", "metric"]
    date_hierarchy = "timestamp"
    list_select_related = ["connection"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
