"""Cloud pages: the connections a user may use, with health and what capacity there is to show."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from clusters.metrics.series import cloud_charts
from tasks.choices import STATE_BADGE, TaskState
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
        "charts": cloud_charts(connection=cloud),
    }
    return render(request, "clusters/cloud_detail.html", context)
