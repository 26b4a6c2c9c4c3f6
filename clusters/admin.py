from functools import partial

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from clusters.choices import BackendKind
from clusters.forms import DEFAULT_FIELDS, KUBERNETES_FIELDS, OPENSTACK_FIELDS, CloudConnectionForm
from clusters.health import connections_check
from clusters.models import CloudConnection, MetricSample
from orphans.connections import connection_delete
from orphans.models import OrphanFinding
from tasks.services.admission import connection_dispatch_said

FORM_ONLY_FIELDS = {*OPENSTACK_FIELDS, *KUBERNETES_FIELDS, *DEFAULT_FIELDS, "check_cloud", "dispatch_override"}
HOST_WARNING = (
    "This connection runs each task's program on the CloudPivot host itself: as the account its run_as option "
    "names (options.run_as), else as the user CloudPivot runs as, who can read the database, its sessions and "
    "the secret key. Grant it only to projects whose members you would give a shell on this host. Only "
    "superusers may grant or change it."
)


OPENSTACK_SECTION = (
    "OpenStack",
    {
        "fields": [*OPENSTACK_FIELDS],
        "description": "Read by openstack connections only. The clouds.yaml entry (or the application "
        "credential) says where the cloud is and which project: there is no endpoint or namespace to fill in.",
    },
)
KUBERNETES_SECTION = (
    "Kubernetes",
    {
        "fields": ["endpoint", "scope", *KUBERNETES_FIELDS, *DEFAULT_FIELDS],
        "description": "Read by kubernetes connections only. Placement (node selectors, tolerations, what "
        "users may choose) goes in Other options: docs/backends/kubernetes.md.",
    },
)


@admin.register(CloudConnection)
class CloudConnectionAdmin(admin.ModelAdmin):
    form = CloudConnectionForm
    change_form_template = "admin/clusters/cloudconnection/change_form.html"
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
                    "dispatch_override",
                    "max_active_tasks",
                ]
            },
        ),
        (
            "Credentials",
            {
                "fields": ["credentials_ref"],
                "description": "Credentials are referenced (a file path, or env:NAME), never stored here.",
            },
        ),
        OPENSTACK_SECTION,
        KUBERNETES_SECTION,
        ("Other options", {"fields": ["options"]}),
        (
            "Who may use it",
            {"fields": ["projects"], "description": "Members of these projects may run tasks and instances here."},
        ),
        ("Save", {"fields": ["check_cloud"]}),
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

    def save_model(self, request, obj, form, change) -> None:
        if form.dispatch_overridden:  # the request's audit entry says dispatch came on without a passing check
            request.audit_details = {"dispatch_override": "turned on without a passing check"}
        super().save_model(request, obj, form, change)
        if change and "dispatch_enabled" in form.changed_data:  # the waiting tasks say what it means for them
            transaction.on_commit(partial(connection_dispatch_said, connection_id=obj.pk))

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
        """A new connection shows every backend's section; an existing one only its own backend's."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None:
            hidden = {
                BackendKind.OPENSTACK: {"Kubernetes"},
                BackendKind.KUBERNETES: {"OpenStack", "Save"},
            }.get(obj.backend, {"OpenStack", "Kubernetes", "Save"})
            fieldsets = [(name, options) for name, options in fieldsets if name not in hidden]
        if obj is not None and not self.has_change_permission(request, obj):
            # view only: the form's own fields (typed options, the save check) have nothing to show
            fieldsets = [
                (name, {**options, "fields": [f for f in options["fields"] if f not in FORM_ONLY_FIELDS]})
                for name, options in fieldsets
            ]
        if obj is None or not obj.runs_on_host:
            return fieldsets
        (name, options), *rest = fieldsets
        return [(name, {**options, "description": HOST_WARNING}), *rest]

    # ------------------------------------------------------------------ test connection
    def get_urls(self):
        view = self.admin_site.admin_view(require_POST(self.test_view))
        return [
            path("<int:object_id>/test/", view, name="clusters_cloudconnection_test"),
            *super().get_urls(),
        ]

    def test_view(self, request: HttpRequest, object_id: int):
        """The page's "Test connection" button: the checks now, each one a line, the verdict stored."""
        connection = self.get_object(request, str(object_id))
        if connection is None or not self.has_change_permission(request, connection):
            raise PermissionDenied
        self._report(request, connections_check([connection]))
        return HttpResponseRedirect(reverse("admin:clusters_cloudconnection_change", args=[object_id]))

    def _report(self, request: HttpRequest, reports) -> None:
        for cloud_id, report in sorted(reports.items()):
            for check in report.checks:
                mark = "ok" if check.ok else ("MISSING" if check.required else "absent")
                level = messages.SUCCESS if check.ok else (messages.ERROR if check.required else messages.WARNING)
                self.message_user(request, f"{cloud_id}: {mark} {check.what}: {check.detail}", level)
            if report.ok:
                self.message_user(request, f"{cloud_id}: OK: {report.summary}", messages.SUCCESS)
            else:
                self.message_user(request, f"{cloud_id}: failing: {report.summary}", messages.ERROR)

    @admin.action(description="Test connection (run its checks now)", permissions=["change"])
    def test_connection(self, request, queryset) -> None:
        """The checks of the scheduled health job, now: each check a line, then the verdict per connection."""
        self._report(request, connections_check(queryset))


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
