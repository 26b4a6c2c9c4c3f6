"""Instance pages: list, launch form and detail (live status by htmx polling, action buttons, operations,
snapshots).

Every path starts from resources.selectors (a foreign or missing instance is a 404); the buttons post
to one view that calls the same services as the API, so the state table, quotas and idempotency hold.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from cloudpivot.accounts.models import Role, SshKey
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.exceptions import ApplicationError, NotFound, PermissionDenied
from clusters.metrics.series import instance_charts
from resources import selectors, services
from resources.access import instance_ssh_command, jump_host
from resources.api.serializers import InstanceCreateSerializer, SnapshotRestoreSerializer
from resources.choices import (
    ALLOWED_FROM,
    OPEN_OPERATION_STATES,
    STATUS_BADGE,
    InstanceStatus,
    SnapshotStatus,
    state_table_key,
)
from resources.fit import instance_fit
from resources.forms import InstanceLaunchForm, parse_volumes
from resources.launch import SNAPSHOT_PREFIX, launch_choices, launch_clouds
from resources.models import Instance
from resources.services import reclaim
from resources.services.volumes import reclaim_in_flight
from tasks.forms import new_idempotency_key

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
    can_launch = bool(launch_clouds(user=request.user, ask_clouds=False))
    volumes = list(selectors.kept_volumes_visible_to(user=request.user).filter(reclaimed_at__isnull=True)[:100])
    for volume in volumes:
        volume.in_flight = reclaim_in_flight(volume)
        volume.can_reclaim = role_at_least(project_role(user=request.user, project=volume.project), Role.SUBMITTER)
    context = {"page": page, "can_launch": can_launch, "kept_volumes": volumes}
    return render(request, "resources/instance_list.html", context)


@login_required
@require_POST
def volume_reclaim(request: HttpRequest, volume_id: Any) -> HttpResponse:
    """The kept-volumes table's Reclaim button: the API's service (the same in-use check, 409 words)."""
    try:
        volume = selectors.kept_volume_get_for_user(user=request.user, volume_id=volume_id)
    except NotFound:
        raise Http404("No such volume.") from None
    try:
        operation, _ = reclaim.volume_reclaim(
            user=request.user, volume=volume, idempotency_key=request.POST.get("idempotency_key", "")[:200]
        )
        messages.success(request, f"Reclaim of {volume.ref} requested (operation {operation.pk}).")
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("resources:instance_list")


# ---------------------------------------------------------------------------- launch
@login_required
def instance_launch(request: HttpRequest) -> HttpResponse:
    """Launch form. Changing the cloud or project re-renders it (htmx picks the choices part); sending it
    validates with the API's request shape and calls the same create service, whose refusals come back next
    to the field they name. A hidden idempotency key makes a double click one instance. Without JavaScript,
    `refresh` posts the form back to show the chosen cloud's choices (a GET form would put the CSRF token in
    the URL)."""
    clouds = launch_clouds(user=request.user)
    source = request.POST if request.method == "POST" else request.GET
    if request.method == "POST" and not clouds:
        raise DjangoPermissionDenied("None of your projects lets you launch instances (submitter or admin needed).")
    choices = launch_choices(
        user=request.user, clouds=clouds, cloud=source.get("cloud", ""), project=source.get("project", "")
    )
    keys = SshKey.objects.filter(user=request.user).order_by("name")
    options = {
        "clouds": [c.cloud_id for c in clouds],
        "projects": [p.slug for p in choices.projects],
        "ssh_keys": [(key.name, f"{key.name} ({key.fingerprint})") for key in keys],
    }
    status = 200
    if request.method == "POST" and not source.get("refresh"):
        form = InstanceLaunchForm(request.POST, **options)
        if form.is_valid():
            operation = _launch(request, form)
            if operation is not None:
                messages.success(request, f"Launch of {operation.instance.name} requested; its progress is below.")
                return redirect("resources:instance_detail", instance_id=operation.instance_id)
        form.describe_errors()
        form.data = form.data.copy()
        form.data["idempotency_key"] = new_idempotency_key()  # the corrected form is a new request
        status = 400
    else:
        initial = {key: source[key] for key in ("name", "flavor", "image") if source.get(key)}
        if choices.connection is not None:
            project = choices.project.slug if choices.project else ""
            initial |= {"cloud": choices.connection.cloud_id, "project": project}
        initial["ssh_keys"] = source.getlist("ssh_keys") if "ssh_keys" in source else [k.name for k in keys]
        form = InstanceLaunchForm(initial=initial | {"idempotency_key": new_idempotency_key()}, **options)
    chosen = {name: form[name].value() or "" for name in ("flavor", "image")}
    if not chosen["flavor"]:  # preselect the smallest size that fits
        chosen["flavor"] = next((size.flavor.name for size in choices.sizes if not size.refusal), "")
    context = {"form": form, "clouds": clouds, "choices": choices, "chosen": chosen}
    return render(request, "resources/instance_launch.html", context, status=status)


@login_required
@require_POST
def instance_fit_verdict(request: HttpRequest) -> HttpResponse:
    """The launch form's "Will it fit?" line (htmx, as the size or project changes): resources.fit's verdict on
    the chosen cloud, project and size. No image chosen yet (or a snapshot) does not change the fit."""
    post = request.POST
    context: dict[str, Any] = {"verdict": None, "problem": ""}
    if not post.get("flavor"):
        context["problem"] = "choose a size."
        return render(request, "partials/_fit_verdict.html", context)
    image = post.get("image", "")
    data = {"name": post.get("name") or "fit", "cloud": post.get("cloud", ""), "flavor": post["flavor"]}
    if post.get("project"):
        data["project"] = post["project"]
    if image and not image.startswith(SNAPSHOT_PREFIX):
        data["image"] = image
    try:
        volumes = parse_volumes(post.get("volumes", ""))
    except ValidationError as exc:
        context["problem"] = exc.messages[0]
        return render(request, "partials/_fit_verdict.html", context)
    if volumes:
        data["volumes"] = volumes
    try:
        context["verdict"] = instance_fit(user=request.user, data=data, image_needed=False)
    except ApplicationError as exc:
        context["problem"] = exc.errors[0]["message"] if exc.errors else exc.message
    return render(request, "partials/_fit_verdict.html", context)


def _launch(request: HttpRequest, form: InstanceLaunchForm):
    """The API's path: InstanceCreateSerializer, then instance_create (a snapshot: the restore's create)."""
    data = {key: form.cleaned_data[key] for key in ("name", "cloud", "project", "flavor", "image")}
    if form.cleaned_data["volumes"]:
        data["volumes"] = form.cleaned_data["volumes"]
    key = form.cleaned_data.get("idempotency_key") or ""
    image = data.pop("image")
    snapshot = None
    if image.startswith(SNAPSHOT_PREFIX):
        if data.get("volumes"):
            form.add_error("volumes", "a launch from a snapshot takes no extra volumes yet: leave this empty")
            return None
        serializer = SnapshotRestoreSerializer(data={k: data[k] for k in ("name", "flavor", "project")})
        try:
            snapshot = selectors.snapshot_get_for_user(user=request.user, snapshot_id=image[len(SNAPSHOT_PREFIX) :])
        except NotFound as exc:
            form.add_error("image", exc.message)
            return None
    else:
        serializer = InstanceCreateSerializer(data=data | {"image": image})
    if not serializer.is_valid():
        form.add_field_errors(serializer.errors)
        return None
    try:
        operation, _ = services.instance_create(
            user=request.user,
            data=dict(serializer.validated_data) | {"ssh_keys": form.cleaned_data["ssh_keys"]},
            idempotency_key=key,
            snapshot=snapshot,
        )
    except ApplicationError as exc:
        if snapshot is not None and exc.errors is None and exc.code != "quota_exceeded":
            form.add_error("image", exc.message)  # the snapshot cannot be restored now (its state, the cloud)
        else:
            form.add_service_errors(exc)
        return None
    return operation


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
        "ssh_command": instance_ssh_command(instance),
        "jump_host": jump_host(instance.connection),
        "badge": STATUS_BADGE.get(instance.status, "grey"),
        "in_flight": in_flight,
        "can_act": can_act,
        "buttons": buttons,
        "can_snapshot": idle and instance.status in ALLOWED_FROM["snapshot"],
        # a volume-booted server cannot be rebuilt from its snapshot (resources/backends/openstack.py): a copy can
        "can_restore": idle and instance.status in ALLOWED_FROM["restore"] and not instance.root_volume_ref,
        "launch_from_snapshot": f"{reverse('resources:instance_launch')}?"
        + urlencode({"cloud": instance.connection.cloud_id, "project": instance.project.slug}),
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
