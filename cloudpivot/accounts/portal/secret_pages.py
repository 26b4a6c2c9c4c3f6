"""The project's secrets page: names and dates for members; add and delete for project admins (the API's twin)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from cloudpivot.accounts.models import Project, Role
from cloudpivot.accounts.portal.project_pages import project_or_404
from cloudpivot.accounts.project_secrets import project_secrets, secret_create, secret_delete
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.exceptions import ApplicationError


def _context(request: HttpRequest, project: Project, **extra: Any) -> dict[str, Any]:
    role = project_role(user=request.user, project=project)
    return {
        "project": project,
        "secrets": project_secrets(project=project),
        "is_admin": role_at_least(role, Role.ADMIN),
        **extra,
    }


@login_required
@require_GET
def secret_list(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(request, slug)
    return render(request, "accounts/secret_list.html", _context(request, project))


@login_required
@require_POST
def secret_add(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(request, slug)
    name = request.POST.get("name", "").strip()
    try:
        secret_create(user=request.user, project=project, name=name, value=request.POST.get("value", ""))
    except ApplicationError as exc:  # the value is never put back into the page
        at_fault = {error.get("field") for error in exc.errors or []}
        context = _context(request, project, error=exc.message, at_fault=at_fault, form={"name": name})
        return render(request, "accounts/secret_list.html", context, status=exc.status)
    messages.success(request, f"Secret {name} saved. Its value cannot be shown again.")
    return redirect("accounts:secret_list", slug=project.slug)


@login_required
@require_POST
def secret_remove(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    project = project_or_404(request, slug)
    try:
        secret_delete(user=request.user, project=project, name=name)
    except ApplicationError as exc:
        return render(
            request, "accounts/secret_list.html", _context(request, project, error=exc.message), status=exc.status
        )
    messages.success(request, f"Secret {name} deleted.")
    return redirect("accounts:secret_list", slug=project.slug)
