"""The orphan report in the admin: findings with delete-in-cloud and adopt actions, and a "scan now" button.

Rows are written only by the scan and by orphans.actions (which re-check the cloud first);
the admin itself edits nothing.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from cloudpivot.accounts.models import Project
from cloudpivot.admin import ReadOnlyAdmin
from cloudpivot.exceptions import ApplicationError
from orphans.actions import orphan_adopt, orphan_delete
from orphans.models import OrphanFinding
from orphans.scan import orphans_scan


class AdoptForm(forms.Form):
    owner = forms.ModelChoiceField(queryset=get_user_model().objects.order_by("username"))
    project = forms.ModelChoiceField(queryset=Project.objects.order_by("slug"), to_field_name="slug")
    name = forms.CharField(max_length=63, required=False, help_text="Empty: the server's name.")


@admin.register(OrphanFinding)
class OrphanFindingAdmin(ReadOnlyAdmin):
    change_list_template = "admin/orphans/orphanfinding/change_list.html"
    list_display = ["category", "kind", "name", "ref", "connection", "is_protected", "state", "reason", "last_seen_at"]
    list_filter = ["category", "state", "kind", "connection"]
    search_fields = ["ref", "name", "reason"]
    list_select_related = ["connection"]
    readonly_fields = [f.name for f in OrphanFinding._meta.fields]
    actions = ["delete_in_cloud", "adopt_servers", "rescan"]

    @admin.display(boolean=True, description="protected")
    def is_protected(self, obj: OrphanFinding) -> bool:
        return obj.protected

    def get_actions(self, request):
        actions = super().get_actions(request)
        if not request.user.is_superuser:  # cloud deletes and adoptions are the platform staff's decision
            actions.pop("delete_in_cloud", None)
            actions.pop("adopt_servers", None)
        return actions

    # ------------------------------------------------------------------ actions
    @admin.action(description="Delete in the cloud (tagged, unprotected only; re-checked now)")
    def delete_in_cloud(self, request: HttpRequest, queryset) -> None:
        for finding in queryset.select_related("connection"):
            try:
                self.message_user(request, orphan_delete(finding=finding, actor=request.user), messages.SUCCESS)
            except ApplicationError as exc:
                self.message_user(request, exc.message, messages.ERROR)

    @admin.action(description="Adopt as an instance (orphan servers; checks tag, state and owner)")
    def adopt_servers(self, request: HttpRequest, queryset):
        if "apply" in request.POST:
            form = AdoptForm(request.POST)
            if form.is_valid():
                for finding in queryset.select_related("connection"):
                    try:
                        instance = orphan_adopt(
                            finding=finding,
                            owner=form.cleaned_data["owner"],
                            project=form.cleaned_data["project"],
                            actor=request.user,
                            name=form.cleaned_data["name"] if queryset.count() == 1 else "",
                        )
                    except ApplicationError as exc:
                        self.message_user(request, exc.message, messages.ERROR)
                    else:
                        self.message_user(request, f"adopted server {finding.ref} as instance {instance}")
                return None
        else:
            form = AdoptForm()
        context = {
            **self.admin_site.each_context(request),
            "title": "Adopt orphan servers",
            "opts": self.model._meta,
            "findings": queryset,
            "form": form,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/orphans/orphanfinding/adopt.html", context)

    @admin.action(description="Scan these findings' clouds again")
    def rescan(self, request: HttpRequest, queryset) -> None:
        connections = {f.connection_id: f.connection for f in queryset.select_related("connection")}
        self.message_user(request, orphans_scan(connections=list(connections.values())))

    # ------------------------------------------------------------------ scan now
    def get_urls(self):
        view = self.admin_site.admin_view(require_POST(self.scan_view))
        return [path("scan/", view, name="orphans_orphanfinding_scan"), *super().get_urls()]

    def scan_view(self, request: HttpRequest):
        if not request.user.is_superuser:
            self.message_user(request, "only platform staff may scan the clouds", messages.ERROR)
        else:
            self.message_user(request, orphans_scan())
        return HttpResponseRedirect(reverse("admin:orphans_orphanfinding_changelist"))
