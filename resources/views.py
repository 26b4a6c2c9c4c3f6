"""Instance pages: list and detail (live status by htmx polling, action buttons, operations, snapshots).

Every path starts from resources.selectors (a foreign or missing instance is a 404); the buttons post
to one view that calls the same services as the API, so the state table, quotas and idempotency hold.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from cloudpivot.accounts.models import Role
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.exceptions import ApplicationError, NotFound, PermissionDenied
from clusters.metrics.series import instance_charts
from resources import selectors, services
from resources.choices import (
    ALLOWED_FROM,
    OPEN_OPERATION_STATES,
    STATUS_BADGE,
    InstanceStatus,
    SnapshotStatus,
    state_table_key,
)
from resources.models import Instance

BUTTONS = [  # (action, extra params, label); shown where resources.choices.ALLOWED_FROM allows them
    ("start", {}, "Start"),
    ("stop", {}, "Stop"),
    ("reboot", {"type": "soft"}, "Reboot"),
    ("reboot", {"type": "hard"}, "Hard reboot"),
    ("pause", {}, "Pause"),
    ("unpause", {}, "Unpause"),
    ("suspend", {}, "Suspend"),
    ("resume", {}, "Resume"),
]


def _instance_or_404(request: HttpRequest, instance_id: Any) -> Instance:
    try:
        return selectors.instance_get_for_user(user=request.user, instance_id=instance_id)
    except NotFound:
        raise Http404("No such instance.") from None


@login_required
@require_GET
def instance_list(request: HttpRequest) -> HttpResponse:
    instances = selectors.instances_visible_to(user=request.user).order_by("-created_at", "-id")
    page = Paginator(instances, 25).get_page(request.GET.get("page"))
    for instance in page.object_list:
        instance.badge = STATUS_BADGE.get(instance.status, "grey")
    return render(request, "resources/instance_list.html", {"page": page})


def _detail_context(request: HttpRequest, instance: Instance) -> dict[str, Any]:
    can_act = role_at_least(project_role(user=request.user, project=instance.project), Role.SUBMITTER)
    in_flight = instance.operation if instance.operation and instance.operation.state in OPEN_OPERATION_STATES else None
    idle = can_act and in_flight is None and instance.status != InstanceStatus.DELETED and bool(instance.server_id)
    buttons = [
        {"action": action, "params": params, "label": label}
        for action, params, label in BUTTONS
        if idle and instance.status in ALLOWED_FROM[state_table_key(action, params)]
    ]
    return {
        "instance": instance,
        "badge": STATUS_BADGE.get(instance.status, "grey"),
        "in_flight": in_flight,
        "can_act": can_act,
        "buttons": buttons,
        "can_snapshot": idle and instance.status in ALLOWED_FROM["snapshot"],
        "can_restore": idle and instance.status in ALLOWED_FROM["restore"],
        "can_delete": can_act and in_flight is None and instance.status != InstanceStatus.DELETED,
        "operations": instance.operations.select_related("requested_by").order_by("-created_at")[:50],
        "snapshots": instance.snapshots.exclude(status=SnapshotStatus.DELETED).order_by("-created_at"),
    }


@login_required
@require_GET
def instance_detail(request: HttpRequest, instance_id: Any) -> HttpResponse:
    instance = _instance_or_404(request, instance_id)
    charts = instance_charts(connection=instance.connection, server_id=instance.server_id)
    return render(request, "resources/instance_detail.html", _detail_context(request, instance) | {"charts": charts})


@login_required
@require_GET
def instance_panel(request: HttpRequest, instance_id: Any) -> HttpResponse:
    """The live part of the detail page; htmx polls it every two seconds."""
    instance = _instance_or_404(request, instance_id)
    return render(request, "resources/_instance_panel.html", _detail_context(request, instance))


@login_required
@require_POST
def instance_act(request: HttpRequest, instance_id: Any) -> HttpResponse:
    instance = _instance_or_404(request, instance_id)
    action = request.POST.get("action", "")
    params = {key: value for key in ("type", "name", "snapshot", "volumes") if (value := request.POST.get(key))}
    try:
        operation, _ = services.instance_action(
            user=request.user,
            instance=instance,
            action=action,
            params=params,
            idempotency_key=request.POST.get("idempotency_key", "")[:200],
        )
        messages.success(request, f"{operation.action.capitalize()} requested; its operation is below.")
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("resources:instance_detail", instance_id=instance.pk)
