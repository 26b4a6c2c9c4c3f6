"""Webhook pages: a project admin's endpoints, subscribing, pause/resume, rotation, deletion, delivery log.

They call the services the API calls (notifications.webhooks), so the rule is the API's: only admins of a
project see and change its endpoints; anyone else gets no controls, a 403 on subscribing and a 404 for a
foreign endpoint. A secret appears once, on the page answering its creation or rotation, never again.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from cloudpivot.accounts.models import Role
from cloudpivot.accounts.selectors import project_role, projects_visible_to
from cloudpivot.exceptions import ApplicationError, NotFound, PermissionDenied
from notifications import webhooks
from notifications.models import WebhookEndpoint

DELIVERY_LOG_ROWS = 50


def _admin_projects(request: HttpRequest) -> list:
    return [
        p for p in projects_visible_to(user=request.user) if project_role(user=request.user, project=p) == Role.ADMIN
    ]


def _endpoint_or_404(request: HttpRequest, endpoint_id: Any) -> WebhookEndpoint:
    try:
        return webhooks.endpoint_get_for_admin(user=request.user, endpoint_id=endpoint_id)
    except NotFound:
        raise Http404("No such webhook.") from None


def _list_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        "endpoints": webhooks.endpoints_visible_to(user=request.user),
        "admin_projects": _admin_projects(request),
        **extra,
    }


@login_required
@require_GET
def webhook_list(request: HttpRequest) -> HttpResponse:
    return render(request, "notifications/webhook_list.html", _list_context(request))


@login_required
@require_POST
def webhook_create(request: HttpRequest) -> HttpResponse:
    event_types = [t.strip() for t in request.POST.get("event_types", "").replace(",", " ").split() if t.strip()]
    form = {key: request.POST.get(key, "").strip() for key in ("project", "url", "description")}
    try:
        endpoint, secret = webhooks.webhook_endpoint_create(user=request.user, event_types=event_types, **form)
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        at_fault = {error.get("field") for error in exc.errors or []}
        form |= {"event_types": " ".join(event_types)}
        context = _list_context(request, form=form, error=exc.message, at_fault=at_fault)
        return render(request, "notifications/webhook_list.html", context, status=400)
    return render(request, "notifications/webhook_detail.html", _detail_context(endpoint, secret=secret), status=201)


def _detail_context(endpoint: WebhookEndpoint, **extra: Any) -> dict[str, Any]:
    deliveries = endpoint.deliveries.select_related("event").order_by("-created_at")[:DELIVERY_LOG_ROWS]
    return {"endpoint": endpoint, "deliveries": deliveries, **extra}


@login_required
@require_GET
def webhook_detail(request: HttpRequest, endpoint_id: Any) -> HttpResponse:
    endpoint = _endpoint_or_404(request, endpoint_id)
    if request.headers.get("HX-Request"):  # the delivery log refreshes itself
        return render(request, "notifications/_delivery_log.html", _detail_context(endpoint))
    return render(request, "notifications/webhook_detail.html", _detail_context(endpoint))


@login_required
@require_POST
def webhook_act(request: HttpRequest, endpoint_id: Any) -> HttpResponse:
    """One form target for the buttons: pause, resume, rotate, delete, redeliver."""
    endpoint = _endpoint_or_404(request, endpoint_id)
    action = request.POST.get("action", "")
    if action in ("pause", "resume"):
        webhooks.webhook_endpoint_update(endpoint=endpoint, is_active=action == "resume")
        messages.success(request, "Deliveries resumed." if action == "resume" else "Paused: deliveries wait.")
    elif action == "rotate":
        secret = webhooks.webhook_secret_rotate(endpoint=endpoint)
        return render(request, "notifications/webhook_detail.html", _detail_context(endpoint, secret=secret))
    elif action == "delete":
        endpoint.delete()
        messages.success(request, f"Webhook {endpoint.url} deleted.")
        return redirect("notifications:webhook_list")
    elif action == "redeliver":
        wanted = request.POST.get("delivery", "")
        delivery = endpoint.deliveries.filter(pk=wanted).first() if _is_uuid(wanted) else None
        if delivery is None:
            raise Http404("No such delivery.")
        webhooks.delivery_redeliver(delivery=delivery)
        messages.success(request, f"Delivery {delivery.webhook_id} will be sent again shortly.")
    else:
        messages.error(request, f"unknown action {action!r}")
    return redirect("notifications:webhook_detail", endpoint_id=endpoint.pk)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
