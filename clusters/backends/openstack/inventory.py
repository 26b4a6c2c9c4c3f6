"""Read-only views of an OpenStack cloud: flavors, images, networks, volumes, our servers, compute quota use."""

from __future__ import annotations

from typing import Any

from clusters.backends.base import BackendError
from clusters.backends.openstack.client import META_ATTEMPT, META_TASK, OpenStackClient

INVENTORY_KINDS = ("flavors", "images", "networks", "volumes", "servers", "quotas")


def usable_flavors(conn) -> list[Any]:
    """The flavors the connection's project may use: the public ones and those shared with it. Without
    `is_public` Nova lists an admin's credentials every project's private flavors too, which are not ours to offer."""
    return list(conn.compute.flavors(details=True, is_public=True))


def inventory(client: OpenStackClient, kind: str) -> list[dict[str, Any]]:
    conn = client.conn()
    if kind == "flavors":
        flavors = client.call("listing flavors", lambda: usable_flavors(conn))
        return [
            {"id": f.id, "name": f.name, "vcpus": f.vcpus, "ram_mb": f.ram, "disk_gb": f.disk}
            for f in sorted(flavors, key=lambda f: (f.vcpus or 0, f.ram or 0, f.name or ""))
        ]
    if kind == "images":
        images = client.call("listing images", lambda: list(conn.image.images()))
        return [
            {
                "id": i.id,
                "name": i.name,
                "status": i.status,
                "size_bytes": i.size,
                "disk_format": i.disk_format,
                "visibility": i.visibility,
            }
            for i in images
        ]
    if kind == "networks":
        networks = client.call("listing networks", lambda: list(conn.network.networks()))
        return [
            {"id": n.id, "name": n.name, "status": n.status, "shared": n.is_shared, "external": n.is_router_external}
            for n in networks
        ]
    if kind == "volumes":
        if not client.has_block_storage():
            raise BackendError(
                f"the {client.connection.cloud_id} cloud has no block-storage (Cinder) service, so it has no volumes",
                kind="not_found",
            )
        volumes = client.call("listing volumes", lambda: list(conn.block_storage.volumes(details=True)))
        return [{"id": v.id, "name": v.name, "status": v.status, "size_gb": v.size} for v in volumes]
    if kind == "servers":
        return [server_summary(s) for s in client.servers()]
    if kind == "quotas":
        return quota_usage(client)
    raise BackendError(
        f"unknown resource kind '{kind}' for the {client.connection.cloud_id} cloud; kinds: "
        + ", ".join(INVENTORY_KINDS),
        kind="not_found",
    )


def quota_usage(client: OpenStackClient) -> list[dict[str, Any]]:
    """The project's compute limits and use: [{resource, used, limit (None: unlimited)}]."""
    limits = client.call("reading compute limits", client.conn().compute.get_limits).absolute
    rows = [
        ("instances", limits.instances_used, limits.instances),
        ("vcpus", limits.total_cores_used, limits.total_cores),
        ("ram_mb", limits.total_ram_used, limits.total_ram),
        ("server_groups", limits.server_groups_used, limits.server_groups),
    ]
    return [
        {"resource": name, "used": used, "limit": None if limit in (None, -1) else limit} for name, used, limit in rows
    ]


def server_summary(server: Any) -> dict[str, Any]:
    metadata = server.metadata or {}
    return {
        "id": server.id,
        "name": server.name,
        "status": server.status,
        "task_state": server.task_state,
        "task": metadata.get(META_TASK),
        "attempt": metadata.get(META_ATTEMPT),
        "flavor": (server.flavor or {}).get("original_name") or (server.flavor or {}).get("id"),
        "created_at": server.created_at,
        "launched_at": server.launched_at,
        "fault": (server.fault or {}).get("message"),
    }
