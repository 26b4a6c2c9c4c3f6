"""Read-only views of a cloud: its inventory (nodes, namespaces, PVCs, pods of our tasks) and current metrics.

Interfaces (API, pages) call these; they ask the connection's backend and turn its errors into
domain errors with words, so a cloud that says no is an answer, not a stack trace.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from cloudpivot.accounts.selectors import projects_visible_to
from cloudpivot.exceptions import ApplicationError, cloud_error
from clusters.backends import get_backend
from clusters.backends.base import BackendError
from clusters.models import CloudConnection


def _domain_error(connection: CloudConnection, exc: BackendError) -> ApplicationError:
    return cloud_error(exc, doing=f"asking the {connection.cloud_id} cloud")


def cloud_inventory(*, connection: CloudConnection, kind: str, user: AbstractBaseUser) -> dict[str, Any]:
    """{"cloud", "kind", "count", "items"} as `user` may see them; NotFound for a kind the cloud has no inventory of."""
    try:
        backend = get_backend(connection)
        kinds = backend.inventory_kinds
        if kinds and kind not in kinds:
            raise BackendError(
                f"unknown resource kind '{kind}' for the {connection.cloud_id} cloud; kinds: {', '.join(kinds)}",
                kind="not_found",
            )
        items = backend.inventory(kind)
    except BackendError as exc:
        raise _domain_error(connection, exc) from None
    if kind == "pvcs":
        items = pvcs_visible_to(user=user, connection=connection, items=items)
    return {"cloud": connection.cloud_id, "kind": kind, "count": len(items), "items": items}


def pvcs_visible_to(*, user: AbstractBaseUser, connection: CloudConnection, items: list[dict]) -> list[dict]:
    """The claims a user may see: superusers all; others those annotated for one of their projects that may use
    the connection (or for every project: "*"), never a VM instance's disk. A claim's name is another project's
    business (it names its data), so readers do not learn it (docs/security.md)."""
    if user.is_superuser:
        return items
    mine = set(projects_visible_to(user=user).filter(connections=connection).values_list("slug", flat=True))
    if not mine:
        return []
    return [
        item
        for item in items
        if not item.get("instance_disk") and ("*" in item.get("projects", ()) or mine & set(item.get("projects", ())))
    ]


def cloud_metrics(*, connection: CloudConnection) -> dict[str, Any]:
    """Current CPU/memory use: {"available": True, "nodes", "pods", "errors"}, or {"available": False, "message"}."""
    try:
        figures = get_backend(connection).metrics()
    except BackendError as exc:
        if exc.kind == "not_found":
            return {"cloud": connection.cloud_id, "available": False, "message": exc.message}
        raise _domain_error(connection, exc) from None
    return {"cloud": connection.cloud_id, "available": True, **figures}


def cloud_capabilities(*, connection: CloudConnection) -> dict[str, Any]:
    """What the cloud offers: the task-document fields it runs (as the submit form shows them), VM instances
    (OpenStack: Nova; Kubernetes: where KubeVirt is served) and their snapshots (KubeVirt: 1.3.0 or newer, with
    the Snapshot feature gate before 1.9)."""
    try:
        backend = get_backend(connection)
        available, message = backend.vm_instances()
        snapshots, snapshot_words = backend.vm_snapshots()
    except BackendError as exc:
        raise _domain_error(connection, exc) from None
    tasks = {
        "fields": sorted(backend.task_fields),
        "image_choices": backend.image_choices,
        "defaults": backend.task_defaults(),
    }
    vm = {"available": available, "message": message}
    # available None: cannot tell (KubeVirt CR unreadable); the cloud's own answer decides at snapshot time
    return {
        "cloud": connection.cloud_id,
        "tasks": tasks,
        "vm_instances": vm,
        "vm_snapshots": {"available": snapshots, "message": snapshot_words},
    }
