"""Cinder volumes of Nova instances: a server's volumes, keeping them through a delete, who uses a kept one.

A kept volume's ref is its Cinder id. "Uses" is what Cinder itself records: an attachment to a server (a guest
that may write to it now), or a status saying one is being made or undone (`attaching`, `reserved`,
`detaching`). A reclaim deletes nothing while any is seen (resources.services.volumes).

Nova deletes a server's volumes with it when their attachment says `delete_on_termination` (what a
boot-from-volume made by someone else may well say). A delete keeping volumes first sets it to false on each
attachment (compute API 2.85) and then deletes the server, so the keep holds whatever the server was made
with; Nova destroys the guest before it detaches the volumes, so nothing writes to them once they are free.
"""

from __future__ import annotations

from typing import Any

from clusters.backends.base import BackendError
from clusters.backends.openstack import OpenStackClient
from resources.backends.base import VolumeView

# 2.89: attachments show delete_on_termination and their attachment id; 2.85: it can be changed
LIST_MICROVERSION, UPDATE_MICROVERSION = "2.89", "2.85"
BUSY = {"attaching", "reserved", "detaching", "in-use", "maintenance"}
GOING = {"deleting", "error_deleting"}


def attachments(client: OpenStackClient, server_id: str) -> list[dict[str, Any]]:
    """The server's volume attachments as Nova lists them: volumeId, device, delete_on_termination."""
    answer = client.compute_request(
        "listing the server's volumes",
        "GET",
        f"/servers/{server_id}/os-volume_attachments",
        microversion=LIST_MICROVERSION,
    )
    return list(answer.get("volumeAttachments") or [])


def volume_ids(client: OpenStackClient, server_id: str) -> list[str]:
    return [a["volumeId"] for a in attachments(client, server_id)]


def boot_volume(client: OpenStackClient, server_id: str) -> str:
    """The volume the server boots from ("" if none): the one made from the image, which Cinder marks
    bootable; data volumes (blank, never bootable) are listed beside it in no set order, and an image-booted
    server may have only those."""
    return next((ref for ref in volume_ids(client, server_id) if getattr(read(client, ref), "is_bootable", False)), "")


def keep_on_delete(client: OpenStackClient, server_id: str) -> list[str]:
    """Make every attachment of the server keep its volume when the server is deleted; returns their ids."""
    kept = []
    for attachment in attachments(client, server_id):
        volume_id = attachment["volumeId"]
        if attachment.get("delete_on_termination"):
            client.compute_request(
                f"keeping volume {volume_id} when the server is deleted",
                "PUT",
                f"/servers/{server_id}/os-volume_attachments/{volume_id}",
                body={"volumeAttachment": {"volumeId": volume_id, "delete_on_termination": False}},
                microversion=UPDATE_MICROVERSION,
            )
        kept.append(volume_id)
    return kept


def read(client: OpenStackClient, ref: str) -> Any | None:
    try:
        return client.call(f"reading volume {ref}", client.conn().block_storage.get_volume, ref)
    except BackendError as exc:
        if exc.kind == "not_found":
            return None
        raise


def volume(client: OpenStackClient, ref: str) -> VolumeView | None:
    found = read(client, ref)
    if found is None:
        return None
    status = found.status or "unknown"
    users = [f"server {a.get('server_id')}" for a in found.attachments or [] if isinstance(a, dict)]
    if not users and status in BUSY:
        users.append(f"an attachment Cinder is still making or undoing (status {status})")
    users = tuple(dict.fromkeys(users))
    return VolumeView(ref=ref, size_gb=int(found.size or 0), status=status, users=users, deleting=status in GOING)


def lost(client: OpenStackClient, refs: list[str]) -> list[str]:
    """Of the volumes a delete kept, those gone or being deleted now the server is gone."""
    gone = []
    for ref in refs:
        found = read(client, ref)
        if found is None or (found.status or "") in GOING:
            gone.append(ref)
    return gone


def delete(client: OpenStackClient, ref: str) -> None:
    """DELETE the volume; already gone is done."""
    try:
        client.call(f"deleting volume {ref}", client.conn().block_storage.delete_volume, ref, ignore_missing=True)
    except BackendError as exc:
        if exc.kind != "not_found":
            raise


def mark(client: OpenStackClient, ref: str, metadata: dict[str, str]) -> None:
    """CloudPivot's marks on a volume Nova made for a server (the orphan scan reads them)."""
    conn = client.conn()
    client.call(f"marking volume {ref}", conn.block_storage.set_volume_metadata, ref, **metadata)
