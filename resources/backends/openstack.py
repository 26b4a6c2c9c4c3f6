"""Persistent instances as Nova servers. The connection, tags and error words come from the OpenStack
package's public client (clusters.backends.openstack.OpenStackClient), so tasks and instances speak to a
cloud the same way.

Each call only asks Nova; whether it happened is seen through `server()` (fresh GETs, never the SDK's
local object: its wait helpers return at once when the local copy already shows the wanted status).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from django.conf import settings

from clusters.backends.openstack import META_INSTALLATION, OpenStackClient, installation_tag
from clusters.backends.openstack.inventory import inventory, usable_flavors
from clusters.models import CloudConnection
from resources.access import jump_host, ssh_port
from resources.backends import openstack_volumes
from resources.backends.base import (
    BackendError,
    CreateRequest,
    FlavorView,
    ImageView,
    InstanceBackend,
    Readiness,
    ServerView,
    VolumeView,
)
from resources.backends.guest_probe import BASELINE_UNREAD, last_boot_marker, ssh_banner
from resources.choices import Action, InstanceStatus

META_INSTANCE = "cloudpivot_instance"
META_INSTANCE_NAME = "cloudpivot_instance_name"
CONSOLE_LINES = 200  # enough for cloud-init's last words to be in it, however chatty the boot was

# Nova status → portal status when no task is in flight.
STATUS_MAP = {
    "BUILD": InstanceStatus.PENDING,
    "ACTIVE": InstanceStatus.RUNNING,
    "SHUTOFF": InstanceStatus.STOPPED,
    "PAUSED": InstanceStatus.PAUSED,
    "SUSPENDED": InstanceStatus.SUSPENDED,
    "REBOOT": InstanceStatus.STARTING,
    "HARD_REBOOT": InstanceStatus.STARTING,
    "REBUILD": InstanceStatus.PENDING,
    "RESIZE": InstanceStatus.RUNNING,
    "VERIFY_RESIZE": InstanceStatus.RUNNING,
    "REVERT_RESIZE": InstanceStatus.RUNNING,
    "MIGRATING": InstanceStatus.RUNNING,
    "SHELVED": InstanceStatus.STOPPED,
    "SHELVED_OFFLOADED": InstanceStatus.STOPPED,
    "ERROR": InstanceStatus.FAILED,
    "UNKNOWN": InstanceStatus.UNKNOWN,
}
# Nova shows a deleted server so for a moment before it answers 404: no server, for every reader (services/run.py's
# delete, the refresh), as the base class's server() says.
GONE = ("DELETED", "SOFT_DELETED")
# Statuses that are themselves work in progress, whatever task_state says.
TRANSITIONAL = {"BUILD", "REBOOT", "HARD_REBOOT", "REBUILD", "RESIZE", "REVERT_RESIZE", "MIGRATING"}
TASK_STATE_STATUS = {
    "powering-off": InstanceStatus.STOPPING,
    "powering-on": InstanceStatus.STARTING,
    "rebooting": InstanceStatus.STARTING,
    "rebooting_hard": InstanceStatus.STARTING,
    "reboot_pending": InstanceStatus.STARTING,
    "reboot_started": InstanceStatus.STARTING,
    "reboot_pending_hard": InstanceStatus.STARTING,
    "reboot_started_hard": InstanceStatus.STARTING,
    "spawning": InstanceStatus.STARTING,
}


def instance_tag(instance_id: str) -> str:
    """The per-instance Nova tag: finding the server again needs no name and no stored id."""
    return f"cpi-{instance_id.replace('-', '')}"


class OpenStackInstances(InstanceBackend):
    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.client = OpenStackClient(connection)  # the connection cache, catalog reader and error words
        self.options = self.client.options
        self._snapshot_refs: dict[str, str] = {}  # image id -> its cloudpivot_snapshot property, as read

    # ------------------------------------------------------------------ reads
    @property
    def has_block_storage(self) -> bool:
        return self.client.has_block_storage()

    def flavor(self, name: str) -> FlavorView:
        found = self._call(f"finding flavor {name!r}", self._conn().compute.find_flavor, name, ignore_missing=True)
        if found is None:
            raise BackendError(f"the {self.connection.cloud_id} cloud has no flavor {name!r}", kind="not_found")
        flavor = self._call(f"reading flavor {name!r}", self._conn().compute.get_flavor, found.id)
        return self._flavor_view(flavor.id, flavor.name, flavor.vcpus, flavor.ram, flavor.disk)

    def flavor_fitting(self, *, vcpus: int, memory_mb: int) -> FlavorView:
        """The smallest flavor with at least this many vCPU and MB (then the smallest disk)."""
        flavors = self._call("listing flavors", lambda: usable_flavors(self._conn()))
        fitting = [f for f in flavors if (f.vcpus or 0) >= vcpus and (f.ram or 0) >= memory_mb]
        if not fitting:
            raise BackendError(
                f"the {self.connection.cloud_id} cloud has no flavor with at least {vcpus} vCPU and {memory_mb} MB",
                kind="not_found",
            )
        best = min(fitting, key=lambda f: (f.vcpus or 0, f.ram or 0, f.disk or 0, f.name or ""))
        return self._flavor_view(best.id, best.name, best.vcpus, best.ram, best.disk)

    def image_ref(self, name: str) -> str:
        image = self._call(f"finding image {name!r}", self._conn().image.find_image, name, ignore_missing=True)
        if image is None:
            raise BackendError(f"the {self.connection.cloud_id} cloud has no image {name!r}", kind="not_found")
        self._snapshot_refs[image.id] = str((image.properties or {}).get("cloudpivot_snapshot") or "")
        return image.id

    def flavors(self) -> list[FlavorView]:
        """The inventory's flavor list (clusters.backends.openstack.inventory), smallest first."""
        return [
            self._flavor_view(f["id"], f["name"], f["vcpus"], f["ram_mb"], f["disk_gb"])
            for f in inventory(self.client, "flavors")
        ]

    def _flavor_view(self, id: str, name: str, vcpus: int | None, ram: int | None, disk: int | None) -> FlavorView:
        """A flavor as CloudPivot counts it: on a `root_disk: volume` connection its disk is the root volume's
        size, at least 1 GB (what create() asks Cinder for, so what the volume quota must count)."""
        disk_gb = self.root_volume_gb(disk or 0) if self.boots_from_volume else disk or 0
        return FlavorView(id=id, name=name, vcpus=vcpus or 0, memory_mb=ram or 0, disk_gb=disk_gb)

    @staticmethod
    def root_volume_gb(flavor_disk_gb: int) -> int:
        """A flavor with no disk (0 GB: "the image's size") still gets a volume: Cinder's smallest, 1 GB."""
        return max(1, flavor_disk_gb)

    def images(self) -> list[tuple[str, str]]:
        """The inventory's active images, by id (names may repeat in Glance), named for people."""
        rows = [i for i in inventory(self.client, "images") if i["status"] == "active"]
        rows.sort(key=lambda i: ((i["name"] or "").lower(), i["id"]))
        return [(i["id"], i["name"] or i["id"]) for i in rows]

    def image_snapshot_ref(self, image_id: str) -> str:
        """The CloudPivot snapshot an image was made as ('' if none): its `cloudpivot_snapshot` property.

        Every CloudPivot project shares the connection's tenant, so any project can see (and name) another
        project's snapshot images; the request checks this before booting one. Free after image_ref().
        """
        if image_id not in self._snapshot_refs:
            image = self._call(f"reading image {image_id}", self._conn().image.get_image, image_id)
            self._snapshot_refs[image_id] = str((image.properties or {}).get("cloudpivot_snapshot") or "")
        return self._snapshot_refs[image_id]

    def server_made_for(self, instance_id: str) -> str | None:
        """Known by the instance's tag; the oldest if a lost answer ever left two."""
        conn = self._conn()
        tags = f"{installation_tag()},{instance_tag(instance_id)}"
        existing = self._call("looking for the instance's server", lambda: list(conn.compute.servers(tags=tags)))
        alive = [s for s in existing if s.status not in GONE]
        return min(alive, key=lambda s: (s.created_at or "", s.id)).id if alive else None

    def server(self, server_id: str) -> ServerView | None:
        try:
            server = self._call(f"reading server {server_id}", self._conn().compute.get_server, server_id)
        except BackendError as exc:
            if exc.kind == "not_found":
                return None
            raise
        return _observed(server)

    def servers(self) -> dict[str, ServerView]:
        conn = self._conn()
        servers = self._call(
            "listing instance servers",
            lambda: list(conn.compute.servers(details=True, tags=installation_tag())),
        )
        views = (_observed(s) for s in servers if (s.metadata or {}).get(META_INSTANCE))
        return {view.id: view for view in views if view is not None}

    def image(self, image_id: str) -> ImageView | None:
        try:
            image = self._call(f"reading image {image_id}", self._conn().image.get_image, image_id)
        except BackendError as exc:
            if exc.kind == "not_found":
                return None
            raise
        size = image.size
        if not size:  # a volume-booted server's snapshot: the bytes are in Cinder, its GB in the mapping
            size = sum(int(m.get("volume_size") or 0) for m in _volume_snapshots(image)) * 2**30 or size
        return ImageView(id=image.id, status=image.status or "", ready=image.status == "active", size_bytes=size)

    def console_log(self, server_id: str, *, lines: int) -> str:
        """Nova asks nova-compute over RPC and waits; seen here: the first such call a fresh nova-api worker
        makes can time out while the next one answers at once. So a timeout is tried once more."""
        read = self._conn().compute.get_server_console_output
        try:
            output = self._call("reading the console log", read, server_id, length=lines)
        except BackendError as exc:
            if exc.kind != "transient":
                raise
            output = self._call("reading the console log (second try)", read, server_id, length=lines)
        return (output or {}).get("output", "") if isinstance(output, dict) else str(output or "")

    def action_failure(self, server_id: str, action: str) -> str:
        """Words for the latest instance action `action` if Nova recorded it as failed ("" otherwise)."""
        conn = self._conn()
        actions = self._call("reading the server's actions", lambda: list(conn.compute.server_actions(server_id)))
        latest = next((a for a in actions if a.action == action), None)
        if latest is None or latest.message != "Error":
            return ""
        detail = self._call("reading the server's action", conn.compute.get_server_action, latest.request_id, server_id)
        failed = [
            e.get("event") if isinstance(e, dict) else getattr(e, "event", "")
            for e in (detail.events or [])
            if (e.get("result") if isinstance(e, dict) else getattr(e, "result", "")) == "Error"
        ]
        return f"Nova's {action} action ended in Error ({', '.join(filter(None, failed)) or 'no event named'})"

    def boot_baseline(self, server_id: str) -> str:
        """The last cloud-init marker on the console before this boot (BASELINE_UNREAD if it cannot be read)."""
        try:
            return last_boot_marker(self.console_log(server_id, lines=CONSOLE_LINES))
        except BackendError:
            return BASELINE_UNREAD

    def readiness(self, view: ServerView, *, baseline: str) -> Readiness:
        """Ready when an SSH server answers at the server's address (only where the control plane reaches it:
        not when the connection names a jump host), or when the console log shows a cloud-init marker that
        was not there before this boot."""
        awaited = []
        port, jump = ssh_port(self.connection), jump_host(self.connection)
        where = f"[{view.address}]:{port}" if ":" in view.address else f"{view.address}:{port}"
        if view.address and not jump:
            banner = ssh_banner(view.address, port)
            if banner:
                return Readiness(True, f"an SSH server answered at {where} ({banner})")
            awaited.append(f"an SSH banner at {where}")
        trusted = baseline != BASELINE_UNREAD
        notes = []
        if trusted:
            try:
                marker = last_boot_marker(self.console_log(view.id, lines=CONSOLE_LINES))
            except BackendError as exc:
                marker = ""
                notes.append(f"the console log could not be read: {exc.message}")
            if marker and marker != baseline:
                return Readiness(True, f"cloud-init's marker in the console log: {marker}")
            awaited.insert(0, "cloud-init's marker in the console log")
        else:
            notes.append(f"{BASELINE_UNREAD[1:-1]}, so a marker in it proves nothing")
        if not view.address:
            notes.append("no address to look for an SSH banner at yet")
        elif jump:
            notes.append(f"no SSH probe: the guest is reached through {jump}")
        words = f"waiting for {' or '.join(awaited)}" if awaited else "waiting: nothing to look at"
        return Readiness(False, words + (f" ({'; '.join(notes)})" if notes else ""))

    # ------------------------------------------------------------------ writes (each only asks)
    def create(self, request: CreateRequest) -> str:
        conn = self._conn()
        made = self.server_made_for(request.instance_id)
        if made:  # an earlier try got as far as Nova: adopt, never make a second one
            return made
        arguments: dict[str, Any] = {
            "name": request.name,
            "flavor_id": request.flavor_id,
            "image_id": request.image,
            "networks": self.client.networks_argument(),
            "metadata": {
                META_INSTANCE: request.instance_id,
                META_INSTANCE_NAME: request.name[:255],
                META_INSTALLATION: str(settings.INSTALLATION_ID),
            },
            "tags": [installation_tag(), instance_tag(request.instance_id)],
        }
        if self.boots_from_volume:  # the root disk a Cinder volume made from the image, kept on delete unless purged
            flavor = self._call("reading the flavor", conn.compute.get_flavor, request.flavor_id)
            del arguments["image_id"]
            arguments["block_device_mapping"] = [
                {
                    "boot_index": 0,
                    "uuid": request.image,
                    "source_type": "image",
                    "destination_type": "volume",
                    "volume_size": self.root_volume_gb(flavor.disk or 0),
                    "delete_on_termination": False,
                }
            ]
        if request.volumes:  # blank data volumes: Nova has Cinder make and attach them; deleted with the server
            # unless a delete keeps them (openstack_volumes.keep_on_delete), like the root volume
            blank = [
                {
                    "boot_index": -1,
                    "source_type": "blank",
                    "destination_type": "volume",
                    "volume_size": volume.size_gb,
                    "delete_on_termination": True,
                }
                for volume in request.volumes
            ]
            # with BDMs Nova wants the boot device among them: an image-booted server's root is a local one
            local_root = {
                "boot_index": 0,
                "uuid": request.image,
                "source_type": "image",
                "destination_type": "local",
                "delete_on_termination": True,
            }
            arguments["block_device_mapping"] = arguments.get("block_device_mapping", [local_root]) + blank
        if request.user_data:  # Nova takes it base64-encoded; it reaches the guest's metadata service
            arguments["user_data"] = base64.b64encode(request.user_data.encode()).decode()
        arguments |= self.client.placement_arguments()
        server = self._call(f"creating server {request.name}", conn.compute.create_server, **arguments)
        return server.id

    def start(self, server_id: str) -> None:
        self._call("starting the server", self._conn().compute.start_server, server_id)

    def stop(self, server_id: str) -> None:
        self._call("stopping the server", self._conn().compute.stop_server, server_id)

    def reboot(self, server_id: str, *, hard: bool) -> None:
        self._call("rebooting the server", self._conn().compute.reboot_server, server_id, "HARD" if hard else "SOFT")

    def pause(self, server_id: str) -> None:
        self._call("pausing the server", self._conn().compute.pause_server, server_id)

    def unpause(self, server_id: str) -> None:
        self._call("unpausing the server", self._conn().compute.unpause_server, server_id)

    def suspend(self, server_id: str) -> None:
        self._call("suspending the server", self._conn().compute.suspend_server, server_id)

    def resume(self, server_id: str) -> None:
        self._call("resuming the server", self._conn().compute.resume_server, server_id)

    def snapshot(self, server_id: str, *, name: str, metadata: dict[str, str]) -> str:
        """Nova's createImage is not idempotent and goes on after its client gave up: the `cloudpivot_snapshot`
        property (in `metadata`) is how snapshot_image() finds what a call whose answer was lost made."""
        image = self._call(
            "snapshotting the server",
            self._conn().compute.create_server_image,
            server_id,
            name=name,
            metadata={**metadata, META_INSTALLATION: str(settings.INSTALLATION_ID)},
            wait=False,
        )
        return image if isinstance(image, str) else image.id

    def snapshot_image(self, made_as: str, *, name: str) -> str | None:
        """Glance can filter on a custom property, but openstacksdk's images() drops query keys it does not know:
        the images of that name are listed, and the property matched here."""
        conn = self._conn()
        images = self._call(f"looking for the image of snapshot {name!r}", lambda: list(conn.image.images(name=name)))
        return next((i.id for i in images if (i.properties or {}).get("cloudpivot_snapshot") == made_as), None)

    def delete_image(self, image_id: str) -> None:
        """Delete the image, and first the Cinder snapshots it names: a prune (services.snapshots) does not wait
        for them to go; the delete Operation has waited already (run.py)."""
        self.delete_image_volume_snapshots(image_id)
        try:
            self._call(f"deleting image {image_id}", self._conn().image.delete_image, image_id, ignore_missing=True)
        except BackendError as exc:
            if exc.kind != "not_found":
                raise

    def image_volume_snapshots(self, image_id: str) -> dict[str, str]:
        conn = self._conn()
        try:
            image = self._call(f"reading image {image_id}", conn.image.get_image, image_id)
        except BackendError as exc:
            if exc.kind == "not_found":
                return {}
            raise
        found = {}
        for mapping in _volume_snapshots(image):
            ref = mapping["snapshot_id"]
            snapshot = self._call(f"reading volume snapshot {ref}", conn.block_storage.find_snapshot, ref)
            if snapshot is not None:
                found[ref] = snapshot.status or "unknown"
        return found

    def delete_image_volume_snapshots(self, image_id: str) -> dict[str, str]:
        found = self.image_volume_snapshots(image_id)
        for ref, status in found.items():
            if status not in ("available", "error"):  # what Cinder's API deletes: not one being made or deleted
                continue
            try:
                self._call(f"deleting volume snapshot {ref}", self._conn().block_storage.delete_snapshot, ref)
            except BackendError as exc:
                if exc.kind != "not_found":
                    raise
        return found

    def rebuild(self, server_id: str, *, image_id: str) -> None:
        self._call("rebuilding the server", self._conn().compute.rebuild_server, server_id, image_id)

    def resize(self, server_id: str, *, flavor_id: str) -> None:
        self._call("resizing the server", self._conn().compute.resize_server, server_id, flavor_id)

    def confirm_resize(self, server_id: str) -> None:
        self._call("confirming the resize", self._conn().compute.confirm_server_resize, server_id)

    def delete(self, server_id: str) -> None:
        """Delete the server, keeping its volumes: each attachment is first set to survive it (a server made
        elsewhere may say delete_on_termination); a purge deletes them afterwards (services.volumes)."""
        try:
            if self.has_block_storage:
                openstack_volumes.keep_on_delete(self.client, server_id)
            self._call("deleting the server", self._conn().compute.delete_server, server_id, ignore_missing=True)
        except BackendError as exc:
            if exc.kind != "not_found":
                raise

    def refusal(self, instance: Any, action: str, params: dict[str, Any]) -> tuple[str, str, str] | None:
        """What Nova cannot do here, asked before an Operation exists: (kind, field, message) or None."""
        if action == Action.CREATE and self.boots_from_volume and not self.has_block_storage:
            return ("unsupported", "cloud", _NO_CINDER_FOR_ROOT.format(cloud=self.connection.cloud_id))
        if action == Action.RESTORE and instance.root_volume_ref:
            return ("unsupported", "action", _NO_REBUILD_FROM_VOLUME.format(name=instance.name))
        return None

    # ------------------------------------------------------------------ volumes (Cinder; openstack_volumes)
    @property
    def boots_from_volume(self) -> bool:
        """The connection's `root_disk: volume`: new servers boot from a Cinder volume made from the image."""
        return self.options.get("root_disk") == "volume"

    @property
    def deletes_volumes(self) -> bool:  # type: ignore[override]
        return self.has_block_storage

    def volumes_to_keep(self, server_id: str) -> list[str]:
        if not self.has_block_storage:
            return []
        try:
            return openstack_volumes.volume_ids(self.client, server_id)
        except BackendError as exc:
            if exc.kind == "not_found":
                return []
            raise

    def lost_volumes(self, server_id: str, volumes: list[str]) -> list[str]:
        return openstack_volumes.lost(self.client, volumes)

    def volume(self, ref: str) -> VolumeView | None:
        return openstack_volumes.volume(self.client, ref)

    def delete_volume(self, ref: str) -> None:
        openstack_volumes.delete(self.client, ref)

    def root_volume(self, server_id: str, instance_id: str) -> str:
        """The Cinder volume the server boots from ("" for an image-booted one), marked as this instance's.
        Also on a `root_disk: ephemeral` connection: a snapshot of a volume-booted server boots from a volume."""
        if not self.has_block_storage:
            return ""
        root = openstack_volumes.boot_volume(self.client, server_id)
        if not root:
            return ""
        openstack_volumes.mark(
            self.client, root, {META_INSTALLATION: str(settings.INSTALLATION_ID), META_INSTANCE: instance_id}
        )
        return root

    # ------------------------------------------------------------------ helpers
    def _conn(self) -> Any:
        return self.client.conn()

    def _call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        return self.client.call(what, function, *args, **kwargs)


_NO_CINDER_FOR_ROOT = (
    "the {cloud} cloud is set to boot instances from a volume (root_disk: volume) but has no block storage "
    "(Cinder) in its catalog; an admin sets root_disk to ephemeral on the connection, or adds Cinder"
)
_NO_REBUILD_FROM_VOLUME = (
    "instance {name} boots from a Cinder volume, which Nova cannot rebuild in place from a snapshot; "
    "launch a new instance from the snapshot instead (POST /api/v1/snapshots/<id>/restore)"
)


def _volume_snapshots(image: Any) -> list[dict[str, Any]]:
    """The Cinder snapshots a volume-booted server's snapshot image boots from (its block_device_mapping)."""
    raw = (image.properties or {}).get("block_device_mapping") or "[]"
    try:
        mappings = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    return [m for m in mappings if isinstance(m, dict) and m.get("source_type") == "snapshot" and m.get("snapshot_id")]


def _observed(server: Any) -> ServerView | None:
    """None for a server Nova shows deleted (GONE): there is no server."""
    return None if server.status in GONE else _view(server)


def _view(server: Any) -> ServerView:
    raw = server.status or "UNKNOWN"
    task_state = server.task_state or ""
    status = TASK_STATE_STATUS.get(task_state) or STATUS_MAP.get(raw, InstanceStatus.UNKNOWN)
    fault = (server.fault or {}).get("message", "") if isinstance(server.fault, dict) else ""
    image = server.image or {}
    flavor = server.flavor or {}
    evidence = {"server_status": raw, "task_state": task_state or None, "power_state": server.power_state}
    if raw == "ACTIVE" and server.power_state == 0:
        evidence["note"] = "Nova shows ACTIVE but power state NOSTATE: the hypervisor does not know the server"
    return ServerView(
        id=server.id,
        status=status,
        settled=not task_state and raw not in TRANSITIONAL,
        raw_status=raw,
        task_state=task_state,
        power_state=server.power_state,
        image_id=image.get("id", "") if isinstance(image, dict) else "",
        flavor=flavor.get("original_name") or flavor.get("id") or "" if isinstance(flavor, dict) else "",
        fault=fault,
        evidence=evidence,
        address=server_address(server),
    )


def server_address(server: Any) -> str:
    """The address users reach: a floating IP first, then a fixed one (IPv4 before IPv6), then the
    access address an operator set on the server (accessIPv4/accessIPv6)."""
    found: list[tuple[int, str]] = []
    for entries in (server.addresses or {}).values():
        for entry in entries or []:
            if isinstance(entry, dict) and entry.get("addr"):
                floating = entry.get("OS-EXT-IPS:type") == "floating"
                found.append(((0 if floating else 2) + (0 if entry.get("version", 4) == 4 else 1), entry["addr"]))
    if found:
        return min(found)[1]
    return server.access_ipv4 or server.access_ipv6 or ""
