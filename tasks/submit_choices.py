"""What the submit form offers for one cloud and project: the fields its backend runs, and the choices for them.

The fields come from the backend (`task_fields`, `image_choices`, `task_defaults`: clusters/backends/base.py),
so a cloud kind that learns a field shows it in the form without a change here. Images: a Kubernetes cloud
takes any reference, so the user's recent ones are offered to pick or type over; an OpenStack cloud boots
what its Glance holds, so the form picks from the inventory the cloud page shows. Only reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from cloudpivot.accounts.models import Project
from cloudpivot.accounts.project_secrets import project_secrets
from cloudpivot.exceptions import ApplicationError
from clusters.backends import get_backend
from clusters.backends.base import TASK_FIELDS_EVERYWHERE, BackendError
from clusters.debug_hold import debug_hold_limit
from clusters.models import CloudConnection
from clusters.selectors import connections_visible_to
from tasks.models import Task

RECENT_IMAGES = 10  # offered in the datalist
RECENT_TASKS_READ = 200  # of the user's latest tasks on the cloud, to find them


@dataclass
class SubmitChoices:
    connection: CloudConnection | None = None
    fields: frozenset[str] = TASK_FIELDS_EVERYWHERE  # the document fields the chosen cloud runs (backend.task_fields)
    image_choices: str = ""  # "", "recent" or "inventory" (backend.image_choices)
    images: list[tuple[str, str]] = field(default_factory=list)  # (value, label)
    defaults: dict[str, Any] = field(default_factory=dict)  # backend.task_defaults()
    secret_names: list[str] = field(default_factory=list)  # of the chosen project, names only
    problem: str = ""  # the cloud's images could not be read, in words
    debug_hold_limit: int = 0  # the most minutes of a debug hold the cloud allows (0: the field is not shown)

    @property
    def kind(self) -> str:
        return self.connection.get_backend_display() if self.connection else ""


def submit_choices(
    *, user: AbstractBaseUser, cloud_id: str, project: Project | None, read_inventory: Callable[..., dict[str, Any]]
) -> SubmitChoices:
    """The choices for the cloud named `cloud_id` among those the user may see (none: nothing offered).

    `read_inventory(connection=, kind=)` answers as the cloud page does for this user (the view passes
    clusters.metrics.visibility.inventory_visible), so no image is offered that the user may not see."""
    choices, backend = _cloud_fields(user=user, cloud_id=cloud_id)
    if backend is None:
        return choices
    choices.image_choices = backend.image_choices if "image" in choices.fields else ""
    connection = choices.connection
    if project is not None and "secrets" in choices.fields:
        choices.secret_names = list(project_secrets(project=project).order_by("name").values_list("name", flat=True))
    if choices.image_choices == "recent":
        choices.images = [(image, image) for image in recent_images(user=user, connection=connection)]
    elif choices.image_choices == "inventory":
        try:
            answer = read_inventory(connection=connection, kind="images")
        except ApplicationError as exc:
            choices.problem = f"{exc.message}; type the image name instead"
        else:
            choices.images = inventory_images(answer["items"])
    return choices


def fit_choices(*, user: AbstractBaseUser, cloud_id: str) -> SubmitChoices:
    """The fields the cloud runs, without the choices' reads (images, secrets): the fit verdict asks often."""
    return _cloud_fields(user=user, cloud_id=cloud_id)[0]


def _cloud_fields(*, user: AbstractBaseUser, cloud_id: str) -> tuple[SubmitChoices, Any]:
    """The cloud's fields and defaults for this user, and its backend (None: no such cloud, or it is broken)."""
    connection = connections_visible_to(user=user).filter(cloud_id=cloud_id).first()
    if connection is None:
        return SubmitChoices(), None
    try:
        backend = get_backend(connection)
    except BackendError as exc:
        return SubmitChoices(connection=connection, problem=exc.message), None
    fields = frozenset(backend.task_fields)
    limit = debug_hold_limit(connection)
    if limit:
        fields |= {"debug_hold_minutes"}
    choices = SubmitChoices(connection=connection, fields=fields, defaults=backend.task_defaults())
    choices.debug_hold_limit = limit
    return choices, backend


def recent_images(*, user: AbstractBaseUser, connection: CloudConnection) -> list[str]:
    """The images of the user's latest tasks on this cloud, newest first, each once."""
    rows = (
        Task.objects.filter(owner=user, connection=connection)
        .order_by("-created_at")
        .values_list("normalized__image", flat=True)[:RECENT_TASKS_READ]
    )
    found: list[str] = []
    for image in rows:
        if isinstance(image, str) and image and image not in found:
            found.append(image)
            if len(found) == RECENT_IMAGES:
                break
    return found


def inventory_images(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Active images by name (by id where a name is missing or shared: Glance allows both), labelled with size."""
    active = [item for item in items if (item.get("status") or "active") == "active"]
    names = [item.get("name") for item in active]
    choices = []
    for item in sorted(active, key=lambda i: ((i.get("name") or "").lower(), i.get("id") or "")):
        name = item.get("name") or ""
        value = name if name and names.count(name) == 1 else item["id"]
        details = [str(item.get("disk_format") or ""), _size(item.get("size_bytes"))]
        label = f"{name or item['id']} ({', '.join(d for d in details if d)})" if any(details) else name or item["id"]
        choices.append((value, label))
    return choices


def _size(size: Any) -> str:
    if not isinstance(size, int) or size <= 0:
        return ""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""
