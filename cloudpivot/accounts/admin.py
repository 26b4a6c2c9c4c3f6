from django.contrib import admin, messages

from cloudpivot.accounts.forms import AdminLoginForm
from cloudpivot.accounts.models import ApiToken, AuditEntry, Membership, Project, Quota
from cloudpivot.accounts.services import api_token_revoke
from cloudpivot.admin import ReadOnlyAdmin

# Guessing passwords at /admin/login/ is throttled like the portal's login (the same per-account limit).
admin.site.login_form = AdminLoginForm


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    raw_id_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["project", "user", "role"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__slug"]
    raw_id_fields = ["user"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created by their owners (shown once); admins see and revoke them, never their values."""

    list_display = ["hint", "name", "user", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "hint"]
    readonly_fields = ["user", "name", "hint", "created_at", "last_used_at", "revoked_at"]
    fields = ["user", "name", "hint", "expires_at", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset:
            api_token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} tokens.", messages.SUCCESS)


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["project", "connection", "max_tasks", "max_vcpu", "max_memory_mb", "max_gpus", "max_instances"]
    list_filter = ["project", "connection"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """Read-only: the audit log is written by the AuditMiddleware only."""

    list_display = ["created_at", "actor_name", "via", "action", "object_ref", "outcome", "status_code", "remote_addr"]
    list_filter = ["via", "outcome", "action"]
    search_fields = ["actor_name", "action", "object_ref", "path"]
    date_hierarchy = "created_at"
