from django import forms
from django.contrib import admin, messages

from cloudpivot import secret_box
from cloudpivot.accounts.forms import AdminLoginForm
from cloudpivot.accounts.models import ApiToken, AuditEntry, Membership, Project, ProjectSecret, Quota
from cloudpivot.accounts.project_secrets import MAX_VALUE_BYTES
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


class ProjectSecretForm(forms.ModelForm):
    """The value is write-only: typed in, encrypted on save, never put back into the page."""

    value = forms.CharField(
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        strip=False,
        required=False,
        help_text="Write-only. On a saved secret, leave empty to keep the current value.",
    )

    class Meta:
        model = ProjectSecret
        fields = ["project", "name"]

    def clean_value(self) -> str:
        value = self.cleaned_data.get("value") or ""
        if not value and self.instance.pk is None:
            raise forms.ValidationError("A new secret needs a value.")
        if len(value.encode()) > MAX_VALUE_BYTES:
            raise forms.ValidationError(f"At most {MAX_VALUE_BYTES} bytes.")
        return value


@admin.register(ProjectSecret)
class ProjectSecretAdmin(admin.ModelAdmin):
    """Names, dates and who saved them; the value can be replaced, never read."""

    form = ProjectSecretForm
    list_display = ["name", "project", "created_at", "updated_at", "created_by", "updated_by"]
    list_filter = ["project"]
    search_fields = ["name", "project__slug"]
    readonly_fields = ["created_at", "updated_at", "created_by", "updated_by"]

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "project", "name"] if obj else self.readonly_fields

    def save_model(self, request, obj, form, change) -> None:
        if form.cleaned_data.get("value"):
            obj.value_encrypted = secret_box.encrypt(form.cleaned_data["value"])
            obj.updated_by = request.user
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
