from django.contrib import admin, messages

from clusters.choices import BackendKind
from clusters.health import connections_check
from clusters.models import CloudConnection, MetricSample
from orphans.connections import connection_delete
from orphans.models import OrphanFinding

HOST_WARNING = (
    "This connection runs each task's program on the CloudPivot host itself: as the account its run_as option "
    "names (options.run_as), else as the user CloudPivot runs as, who can read the database, its sessions and "
    "the secret key. Grant it only to projects whose members you would give a shell on this host. Only "
    "superusers may grant or change it."
)


@admin.register(CloudConnection)
class CloudConnectionAdmin(admin.ModelAdmin):
    list_display = [
        "cloud_id",
        "backend",
        "runs_on_host",
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
        (
            None,
            {
                "fields": [
                    "cloud_id",
                    "name",
                    "backend",
                    "runs_on_host",
                    "dispatch_enabled",
                    "max_active_tasks",
                    "projects",
                ]
            },
        ),
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

    # ------------------------------------------------------------------ code on the host: superusers only
    def has_change_permission(self, request, obj=None) -> bool:
        """Granting or changing a connection that runs programs on this host is a superuser's act: it hands out
        code execution on the server (docs/security.md)."""
        if obj is not None and obj.runs_on_host and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.runs_on_host and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs, request):
        """A connection's orphan findings go with it (they describe that connection's view of the cloud): the
        findings' admin is read-only, which must not make the connection itself undeletable."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed = perms_needed - {OrphanFinding._meta.verbose_name}
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj) -> None:
        connection_delete(connection=obj, actor=request.user)

    def delete_queryset(self, request, queryset) -> None:
        for connection in queryset:
            connection_delete(connection=connection, actor=request.user)

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return fields if request.user.is_superuser else [*fields, "runs_on_host"]

    def formfield_for_choice_field(self, db_field, request, **kwargs):
        """Staff who are not superusers cannot make a `local` connection (they could grant it to themselves)."""
        if db_field.name == "backend" and not request.user.is_superuser:
            kwargs["choices"] = [c for c in BackendKind.choices if c[0] != BackendKind.LOCAL]
        return super().formfield_for_choice_field(db_field, request, **kwargs)

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or not obj.runs_on_host:
            return fieldsets
        (name, options), *rest = fieldsets
        return [(name, {**options, "description": HOST_WARNING}), *rest]

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
