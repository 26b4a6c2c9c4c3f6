"""Project pages: the user's projects, and one project's members and roles, quotas with what is in use, and
links to its webhooks.

Members see a project (a 404 for anyone else); its admins (and platform staff) change its members. The rule
is the services' (cloudpivot.accounts.services.membership_*): a member who is not admin gets a 403 on any
change, and the last admin can be neither demoted nor removed. Errors go back next to the field at fault.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from cloudpivot.accounts.models import Project, Role
from cloudpivot.accounts.portal.forms import MemberAddForm
from cloudpivot.accounts.selectors import project_role, projects_visible_to
from cloudpivot.accounts.services import (
    membership_add,
    membership_change_role,
    membership_remove,
    require_project_admin,
)
from cloudpivot.exceptions import ApplicationError, PermissionDenied
from cloudpivot.quota_bars import project_quota_cards, project_usage_card
from notifications.models import WebhookEndpoint


def project_or_404(request: HttpRequest, slug: str) -> Project:
    """The project by its slug if the user may see it; a 404 alike for a missing and a foreign one."""
    project = projects_visible_to(user=request.user).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project.")
    return project


def _detail_context(request: HttpRequest, project: Project, **extra: Any) -> dict[str, Any]:
    role = project_role(user=request.user, project=project)
    is_admin = role == Role.ADMIN
    errors = extra.pop("member_errors", {})
    memberships = list(project.memberships.select_related("user").order_by("user__username"))
    for membership in memberships:
        membership.error = errors.get(membership.pk, "")  # shown next to that member's role
    return {
        "project": project,
        "role": role,
        "is_admin": is_admin,
        "roles": Role.choices,
        "memberships": memberships,
        "add_form": extra.pop("add_form", None) or MemberAddForm(),
        "quota_cards": project_quota_cards(project=project) or [project_usage_card(project=project)],
        "clouds": project.connections.order_by("cloud_id").values_list("cloud_id", flat=True),
        # Only a project's admins see its webhooks (notifications.webhooks): others get no count.
        "webhooks": WebhookEndpoint.objects.filter(project=project).count() if is_admin else None,
        **extra,
    }


@login_required
@require_GET
def project_list(request: HttpRequest) -> HttpResponse:
    # Counted apart from the visibility filter, which joins memberships to only the user's own row.
    visible = projects_visible_to(user=request.user).values("pk")
    projects = list(Project.objects.filter(pk__in=visible).annotate(member_count=Count("memberships")))
    for project in projects:
        project.role = project_role(user=request.user, project=project)
    return render(request, "accounts/project_list.html", {"projects": projects})


@login_required
@require_GET
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(request, slug)
    return render(request, "accounts/project_detail.html", _detail_context(request, project))


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(request, slug)
    form = MemberAddForm(request.POST)
    status = 400
    try:
        if form.is_valid():
            membership = membership_add(actor=request.user, project=project, **form.cleaned_data)
            messages.success(request, f"{membership.user.get_username()} added as {membership.get_role_display()}.")
            return redirect("accounts:project_detail", slug=project.slug)
        require_project_admin(actor=request.user, project=project)  # a non-admin's bad form is still a 403
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        form.add_service_errors(exc)
        status = exc.status
    form.describe_errors()
    context = _detail_context(request, project, add_form=form)
    return render(request, "accounts/project_detail.html", context, status=status)


@login_required
@require_POST
def member_act(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    """One target for a member row's buttons: `action=role` (with `role`) or `action=remove`."""
    project = project_or_404(request, slug)
    membership = project.memberships.select_related("user", "project").filter(pk=membership_id).first()
    if membership is None:
        raise Http404("No such member.")
    action = request.POST.get("action", "")
    name = membership.user.get_username()
    try:
        if action == "role":
            membership = membership_change_role(
                actor=request.user, membership=membership, role=request.POST.get("role", "")
            )
            messages.success(request, f"{name} is now {membership.get_role_display()}.")
        elif action == "remove":
            membership_remove(actor=request.user, membership=membership)
            messages.success(request, f"{name} removed from {project.slug}.")
        else:
            raise Http404(f"unknown action {action!r}")
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        context = _detail_context(request, project, member_errors={membership.pk: exc.message})
        return render(request, "accounts/project_detail.html", context, status=exc.status)
    if not projects_visible_to(user=request.user).filter(pk=project.pk).exists():  # they removed themselves
        return redirect("accounts:project_list")
    return redirect("accounts:project_detail", slug=project.slug)
