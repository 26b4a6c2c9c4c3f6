"""A project's usage page: this month's (or another's) core-, GPU- and memory-GB-hours per user and cloud,
the budget with its burn-down, a CSV export. Members only (a 404 alike for others)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from cloudpivot.accounts.selectors import projects_visible_to
from usage.accounting import month_bounds, usage_rows
from usage.budgets import budget_status
from usage.burndown import burndown_svg
from usage.models import ProjectBudget


@login_required
@require_GET
def project_usage(request: HttpRequest, slug: str) -> HttpResponse:
    project = projects_visible_to(user=request.user).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project.")
    month = request.GET.get("month") or None
    try:
        start, end = month_bounds(month)
    except ValueError as exc:
        month_error, (start, end), month = str(exc), month_bounds(None), None
    else:
        month_error = ""
    budget = ProjectBudget.objects.filter(project=project).first()
    status = budget_status(budget, start.strftime("%Y-%m")) if budget else None
    context = {
        "project": project,
        "month": start.strftime("%Y-%m"),
        "month_error": month_error,
        "rows": usage_rows(start=start, end=end, project_ids=[project.pk], by=("user", "cloud")),
        "status": status,
        "burndown": burndown_svg(status) if status else "",
    }
    return render(request, "usage/project_usage.html", context)
