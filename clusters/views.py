"""Cloud pages: the connections a user may use, with health, inventory and what capacity there is to show."""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from clusters.health import connections_check, next_scheduled_check
from clusters.inventory_tables import cloud_inventory_tables, inventory_kinds
from clusters.metrics.series import cloud_charts
from clusters.metrics.visibility import inventory_visible, sees_whole_cloud
from clusters.selectors import connections_visible_to
from tasks.choices import STATE_BADGE, TaskState
from tasks.models import Attempt
from tasks.phases import phase_stats
from tasks.portal import connections_with_load
from tasks.selectors import tasks_visible_to


@login_required
@require_GET
def cloud_list(request: HttpRequest) -> HttpResponse:
    return render(request, "clusters/cloud_list.html", {"clouds": connections_with_load(user=request.user)})


@login_required
@require_GET
def cloud_detail(request: HttpRequest, cloud_id: str) -> HttpResponse:
    cloud = connections_with_load(user=request.user).filter(cloud_id=cloud_id).first()
    if cloud is None:
        raise Http404("No such cloud.")
    visible = tasks_visible_to(user=request.user).filter(connection=cloud)
    counts = dict(visible.order_by().values_list("state").annotate(n=Count("id")))
    by_state = [
        {"state": state, "label": label, "colour": STATE_BADGE[state], "count": counts[state]}
        for state, label in TaskState.choices
        if counts.get(state)
    ]
    context = {
        "cloud": cloud,
        "by_state": by_state,
        "recent": visible.order_by("-created_at")[:10],
        "charts": cloud_charts(connection=cloud, with_nodes=sees_whole_cloud(request.user)),
        "has_inventory": bool(inventory_kinds(cloud)),
        "next_check": next_scheduled_check(),
        "phase_stats": phase_stats(Attempt.objects.filter(task__in=visible)),
    }
    return render(request, "clusters/cloud_detail.html", context)


@login_required
@require_GET
def cloud_inventory(request: HttpRequest, cloud_id: str) -> HttpResponse:
    """The inventory panel, loaded after the page (htmx) so a slow cloud never holds the page back."""
    cloud = _visible_cloud(request, cloud_id)
    read = partial(inventory_visible, user=request.user)  # readers: their projects' objects; cloud-wide: admins
    return render(
        request,
        "clusters/_inventory.html",
        {"cloud": cloud, "inventory": cloud_inventory_tables(connection=cloud, read=read)},
    )


@login_required
@require_POST
def cloud_check(request: HttpRequest, cloud_id: str) -> HttpResponse:
    """Staff: run the connection's health checks now (what the schedule does every few minutes)."""
    if not request.user.is_staff:
        raise PermissionDenied("Only staff may check a connection.")
    cloud = _visible_cloud(request, cloud_id)
    report = connections_check([cloud])[cloud.cloud_id]
    if report.ok:
        messages.success(request, f"{cloud.cloud_id} answered: {report.summary}")
    else:
        messages.error(request, f"{cloud.cloud_id} is failing: {report.summary}")
    return redirect("clusters:cloud_detail", cloud_id=cloud.cloud_id)


def _visible_cloud(request: HttpRequest, cloud_id: str):
    cloud = connections_visible_to(user=request.user).filter(cloud_id=cloud_id).first()
    if cloud is None:
        raise Http404("No such cloud.")
    return cloud
