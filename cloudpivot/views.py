"""The dashboard: the user's running, queued and recent tasks, usable clouds and quota usage."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from cloudpivot.quota_bars import quota_cards, usage_cards
from tasks.portal import connections_with_load, dashboard_tasks
from tasksets.portal import recent_sets


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    context = {"sections": dashboard_tasks(user=request.user), "since": timezone.now().isoformat()}
    if request.htmx and not request.htmx.boosted:
        return render(request, "_dashboard_tasks.html", context)
    context["clouds"] = connections_with_load(user=request.user)
    # A provider's first login creates the user in no project: say so instead of an empty dashboard.
    context["no_project"] = not request.user.is_superuser and not request.user.memberships.exists()
    context["quotas"] = quota_cards(user=request.user)
    context["usage"] = usage_cards(user=request.user)  # the user's projects with no limit: their use all the same
    context["sets"] = recent_sets(user=request.user)  # my newest task sets with their progress
    return render(request, "home.html", context)
