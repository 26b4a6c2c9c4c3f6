"""Operators' view of instances, snapshots and operations. Observations and the log are read-only;
an owner change goes through instance_owner_change (audited), never a raw field edit."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model

from cloudpivot.admin import ReadOnlyAdmin
from cloudpivot.exceptions import ApplicationError
from resources.models import Instance, KeptVolume, Operation, Snapshot
from resources.services import instance_owner_change


class InstanceAdminForm(forms.ModelForm):
    new_owner = forms.ModelChoiceField(
        queryset=get_user_model().objects.all(),
        required=False,
        help_text="Give the instance to another member of its project (audited).",
    )

    class Meta:
        model = Instance
        fields = ["name"]


class OperationInline(admin.TabularInline):
    model = Operation
    extra = 0
    can_delete = False
    fields = ["created_at", "action", "requested_by", "state", "error_kind", "error_message", "finished_at"]
    readonly_fields = fields
    ordering = ["-created_at"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    form = InstanceAdminForm
    list_display = ["name", "short_id", "status", "desired_power_state", "connection", "project", "owner", "created_at"]
    list_filter = ["status", "connection", "project"]
    search_fields = ["id", "name", "server_id", "owner__username"]
    list_select_related = ["connection", "project", "owner"]
    readonly_fields = [
        "id",
        "project",
        "owner",
        "connection",
        "backend",
        "flavor",
        "vcpus",
        "memory_mb",
        "disk_gb",
        "image",
        "volumes",
        "volumes_gb",
        "desired_power_state",
        "boot_id",
        "status",
        "status_reason",
        "status_changed_at",
        "observed_at",
        "operation",
        "server_id",
        "root_volume_ref",
        "deleted_at",
        "created_at",
        "updated_at",
    ]
    inlines = [OperationInline]

    def has_add_permission(self, request) -> bool:
        return False  # instances are made through the API or pages, which check quotas and ask the cloud

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a row delete would leave the server running and lose its log: use the delete action

    def save_model(self, request, obj, form, change) -> None:
        new_owner = form.cleaned_data.get("new_owner")
        Instance.objects.filter(pk=obj.pk).update(name=obj.name)
        if new_owner and new_owner.pk != obj.owner_id:
            try:
                instance_owner_change(instance=obj, new_owner=new_owner, actor=request.user)
            except ApplicationError as exc:
                self.message_user(request, exc.message, level=messages.ERROR)


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "project", "connection", "instance", "size_bytes", "created_at"]
    list_filter = ["status", "connection", "project"]
    search_fields = ["id", "name", "image_id"]
    readonly_fields = [f.name for f in Snapshot._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a row delete would leave the image in the cloud: delete through the API or pages


@admin.register(KeptVolume)
class KeptVolumeAdmin(ReadOnlyAdmin):
    """Read-only: a row delete would forget a disk still in the cloud (and its quota); reclaim it instead."""

    list_display = ["ref", "size_gb", "project", "connection", "instance", "created_at", "reclaimed_at"]
    list_filter = ["connection", "project"]
    search_fields = ["id", "ref", "instance__name"]
    readonly_fields = [f.name for f in KeptVolume._meta.fields]


@admin.register(Operation)
class OperationAdmin(ReadOnlyAdmin):
    list_display = ["id", "action", "state", "instance", "project", "requested_by", "created_at", "finished_at"]
    list_filter = ["state", "action", "project"]
    search_fields = ["id", "instance__name", "idempotency_key"]
    readonly_fields = [f.name for f in Operation._meta.fields]
