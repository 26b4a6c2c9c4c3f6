"""What a user may see of a cloud's inventory and current figures (DESIGN §7; docs/security.md).

A connection is shared by several projects, and the cloud's own listings are not: a reader of one
project must not learn another project's pods, servers, snapshot images or usage through them. So,
for anyone but staff:
- cluster- and tenant-wide kinds (nodes, namespaces, volumes, the tenant's quota) are for admins (403);
- pods and servers are those of the user's projects' task attempts (and, for servers, their instances);
- images hide the snapshot images of projects the user does not see (the catalogue stays);
- current figures keep only the pods of the user's attempts, and no node figures.
Sampled series are checked per subject by the API (nodes are for admins there too).

Lives with metrics (the top layer) because it reads tasks and resources; the interfaces call it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from cloudpivot.exceptions import PermissionDenied
from clusters.inventory import cloud_inventory, cloud_metrics
from clusters.inventory_tables import inventory_kinds
from clusters.models import CloudConnection
from resources.models import Snapshot
from resources.selectors import instances_visible_to, snapshots_visible_to
from tasks.models import Attempt
from tasks.selectors import tasks_visible_to

ADMIN_ONLY_KINDS = frozenset({"nodes", "namespaces", "volumes", "quotas"})


def sees_whole_cloud(user: AbstractBaseUser) -> bool:
    """Staff (the platform's administrators) see every project's objects on every cloud."""
    return bool(user.is_staff or user.is_superuser)


def inventory_visible(*, user: AbstractBaseUser, connection: CloudConnection, kind: str) -> dict[str, Any]:
    """clusters.inventory.cloud_inventory, cut to what `user` may see; PermissionDenied for admin-only kinds."""
    if not sees_whole_cloud(user) and kind in ADMIN_ONLY_KINDS and kind in inventory_kinds(connection):
        raise PermissionDenied(
            f"the {kind} of the {connection.cloud_id} cloud are cloud-wide: only administrators see them",
            code="admins_only",
        )
    answer = cloud_inventory(connection=connection, kind=kind, user=user)
    if sees_whole_cloud(user) or kind not in ("pods", "servers", "images"):
        return answer
    items = answer["items"]
    if kind == "images":
        foreign = foreign_snapshot_images(user=user, connection=connection)
        items = [item for item in items if item.get("id") not in foreign]
    else:
        mine = attempt_names_visible(user=user, connection=connection)
        if kind == "servers":
            instances = instances_visible_to(user=user).filter(connection=connection)
            mine |= {server for server in instances.values_list("server_id", flat=True) if server}
        items = [item for item in items if item.get("attempt") in mine or item.get("id") in mine]
    return answer | {"items": items, "count": len(items)}


def metrics_visible(*, user: AbstractBaseUser, connection: CloudConnection) -> dict[str, Any]:
    """clusters.inventory.cloud_metrics with only the user's pods and, unless staff, no node figures."""
    figures = cloud_metrics(connection=connection)
    if sees_whole_cloud(user) or not figures.get("available"):
        return figures
    mine = attempt_names_visible(user=user, connection=connection)
    pods = [pod for pod in figures.get("pods") or [] if pod.get("attempt") in mine]
    return figures | {"pods": pods, "nodes": [], "nodes_hidden": "node figures are shown to administrators only"}


def attempt_names_visible(*, user: AbstractBaseUser, connection: CloudConnection) -> set[str]:
    """The external names of the attempts on this connection of tasks the user sees."""
    tasks = tasks_visible_to(user=user).filter(connection=connection)
    return set(Attempt.objects.filter(task__in=tasks).values_list("external_name", flat=True))


def foreign_snapshot_images(*, user: AbstractBaseUser, connection: CloudConnection) -> set[str]:
    """The image ids of this cloud's snapshots that belong to projects the user does not see."""
    mine = snapshots_visible_to(user=user).values_list("pk", flat=True)
    rows = Snapshot.objects.filter(connection=connection).exclude(pk__in=mine).values_list("image_id", flat=True)
    return {image for image in rows if image}
