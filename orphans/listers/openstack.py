"""OpenStack resources CloudPivot tagged: servers (by the installation's Nova tag), snapshot images (by the
`cloudpivot_installation` property CloudPivot writes on every snapshot) and volumes (where the cloud has
block storage). One LIST per kind per scan; reads by id for the re-checks an action makes.

Connections, tags and error words come from the OpenStack package's public client (OpenStackClient).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from clusters.backends.base import BackendError
from clusters.backends.openstack import META_ATTEMPT, META_INSTALLATION, META_TASK, OpenStackClient, installation_tag
from clusters.models import CloudConnection
from orphans.listers.base import IMAGE, PROTECTED_PROPERTY, PROTECTED_TAG, SERVER, VOLUME, CloudItem, is_true
from resources.backends.openstack import META_INSTANCE, META_INSTANCE_NAME, instance_tag

META_SNAPSHOT = "cloudpivot_snapshot"
META_SERVER = "instance_uuid"  # what Nova writes on a server's snapshot image: the server it came from


class OpenStackTagged:
    instance_kind = SERVER  # what an Instance row expects in this cloud (the "missing" check)
    snapshot_kind = IMAGE

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.client = OpenStackClient(connection)
        self.notes: list[str] = []

    # ------------------------------------------------------------------ listing
    def items(self) -> list[CloudItem]:
        conn = self.client.conn()
        servers = self._call("listing tagged servers", lambda: list(conn.compute.servers(tags=installation_tag())))
        images = self._call("listing images", lambda: list(conn.image.images()))
        found = [server_item(s) for s in servers]
        found += [image_item(i) for i in images]
        found = [item for item in found if item.ours]  # the tag filter is the cloud's; checked again here
        if self.client.has_block_storage():
            volumes = self._call("listing volumes", lambda: list(conn.block_storage.volumes(details=True)))
            found += [item for item in (volume_item(v) for v in volumes) if item.ours]
        else:
            self.notes.append(
                f"the {self.connection.cloud_id} cloud has no block-storage (Cinder) service: no volumes to compare"
            )
        return found

    def read(self, kind: str, ref: str) -> CloudItem | None:
        conn = self.client.conn()
        getter, convert = {
            SERVER: (conn.compute.get_server, server_item),
            IMAGE: (conn.image.get_image, image_item),
            VOLUME: (lambda ref: conn.block_storage.get_volume(ref), volume_item),
        }[kind]
        try:
            return convert(self._call(f"reading {kind} {ref}", getter, ref))
        except BackendError as exc:
            if exc.kind == "not_found":
                return None
            raise

    # ------------------------------------------------------------------ writes
    def delete(self, item: CloudItem) -> None:
        conn = self.client.conn()
        deleter = {  # looked up lazily: a cloud without block storage has no `block_storage` proxy at all
            SERVER: lambda: conn.compute.delete_server,
            IMAGE: lambda: conn.image.delete_image,
            VOLUME: lambda: conn.block_storage.delete_volume,
        }[item.kind]()
        self._call(f"deleting {item.kind} {item.ref}", deleter, item.ref, ignore_missing=True)

    def claim_server(self, server_id: str, *, instance_id: str, name: str) -> None:
        """Mark an adopted server as the instance's, the way `create` marks a new one: metadata and a tag."""
        conn = self.client.conn()
        server = self._call("reading the server", conn.compute.get_server, server_id)
        self._call(
            "writing the instance metadata",
            conn.compute.set_server_metadata,
            server,
            **{META_INSTANCE: instance_id, META_INSTANCE_NAME: name[:255], META_INSTALLATION: installation_id()},
        )
        self._call("tagging the server", conn.compute.add_tag_to_server, server, instance_tag(instance_id))

    def _call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        return self.client.call(what, function, *args, **kwargs)


def installation_id() -> str:
    return str(settings.INSTALLATION_ID)


def server_item(server: Any) -> CloudItem:
    tags = list(server.tags or [])
    metadata = dict(server.metadata or {})
    recorded = metadata.get(META_INSTALLATION)
    reasons = []
    if PROTECTED_TAG in tags or is_true(metadata.get(PROTECTED_PROPERTY)):
        reasons.append(f"tagged {PROTECTED_TAG}")
    if server.is_locked:
        reasons.append("locked in Nova")
    flavor = server.flavor if isinstance(server.flavor, dict) else {}
    return CloudItem(
        kind=SERVER,
        ref=server.id,
        name=server.name or "",
        status=server.status or "UNKNOWN",
        # The tag is the mark; a recorded installation that differs wins over a copied tag.
        ours=installation_tag() in tags and recorded in (None, installation_id()),
        owner={
            key: metadata[meta]
            for key, meta in (("instance", META_INSTANCE), ("attempt", META_ATTEMPT), ("task", META_TASK))
            if metadata.get(meta)
        },
        protected_reason="; ".join(reasons),
        evidence={
            "status": server.status,
            "task_state": server.task_state or None,
            "tags": tags,
            "metadata": metadata,
            "flavor": {k: flavor.get(k) for k in ("original_name", "vcpus", "ram", "disk") if k in flavor},
            "image": (server.image or {}).get("id", "") if isinstance(server.image, dict) else "",
            "created_at": server.created_at,
        },
    )


def image_item(image: Any) -> CloudItem:
    properties = dict(image.properties or {})
    tags = list(image.tags or [])
    reasons = []
    if image.is_protected:
        reasons.append("protected in Glance")
    if PROTECTED_TAG in tags or is_true(properties.get(PROTECTED_PROPERTY)):
        reasons.append(f"tagged {PROTECTED_TAG}")
    owner = {
        key: str(properties[prop])
        for key, prop in (("snapshot", META_SNAPSHOT), ("instance", META_INSTANCE))
        if properties.get(prop)
    }
    source = getattr(image, META_SERVER, None) or properties.get(META_SERVER)  # the SDK reads it as an attribute
    if source:
        owner["server"] = str(source)
    return CloudItem(
        kind=IMAGE,
        ref=image.id,
        name=image.name or "",
        status=image.status or "",
        ours=str(properties.get(META_INSTALLATION, "")) == installation_id(),
        owner=owner,
        protected_reason="; ".join(reasons),
        evidence={"status": image.status, "size_bytes": image.size, "tags": tags, "created_at": image.created_at},
    )


def volume_item(volume: Any) -> CloudItem:
    metadata = dict(volume.metadata or {})
    protected = f"{PROTECTED_PROPERTY}=true" if is_true(metadata.get(PROTECTED_PROPERTY)) else ""
    attached = [a.get("server_id") for a in volume.attachments or [] if isinstance(a, dict)]
    if attached:
        protected = "; ".join(filter(None, [protected, "attached to " + ", ".join(map(str, attached))]))
    return CloudItem(
        kind=VOLUME,
        ref=volume.id,
        name=volume.name or "",
        status=volume.status or "",
        ours=str(metadata.get(META_INSTALLATION, "")) == installation_id(),
        owner={"instance": metadata[META_INSTANCE]} if metadata.get(META_INSTANCE) else {},
        protected_reason=protected,
        evidence={"status": volume.status, "size_gb": volume.size, "metadata": metadata},
    )
