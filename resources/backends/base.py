"""What an instance backend offers (OpenStack: Nova; Kubernetes: KubeVirt), and the plain data it answers with.

Backends never touch the ORM. They translate the cloud's words into the portal's statuses
(`ServerView.status`) so that the services can state post-conditions once for every backend.
Optional abilities (`refusal`, `image_snapshot_ref`) have their "nothing to say" default here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusters.backends.base import BackendError

__all__ = [
    "BackendError",
    "DataVolume",
    "FlavorView",
    "ImageView",
    "InstanceBackend",
    "Readiness",
    "ServerView",
    "Unsupported",
    "VolumeView",
]


class Unsupported(BackendError):
    """The backend cannot do this at all (not a passing state): refused at once, never hidden."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="invalid_spec")


@dataclass(frozen=True)
class FlavorView:
    id: str
    name: str
    vcpus: int
    memory_mb: int
    disk_gb: int


@dataclass(frozen=True)
class ServerView:
    """One observation of a server. `settled` is False while the cloud still works on it (a task_state)."""

    id: str
    status: str  # an InstanceStatus value
    settled: bool
    raw_status: str
    task_state: str = ""
    power_state: int | None = None
    image_id: str = ""
    flavor: str = ""
    fault: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    source: str = "Nova"  # who reported it, in reasons: "Nova: SHUTOFF", "KubeVirt: Stopped"
    address: str = ""  # where users reach it (a floating or fixed IP, the VMI's interface), "" while it has none


@dataclass(frozen=True)
class Readiness:
    """Whether the guest (not its hypervisor) is up: `reason` says what showed it, or what is awaited."""

    ready: bool
    reason: str


@dataclass(frozen=True)
class ImageView:
    id: str
    status: str  # the cloud's word (Glance: queued, saving, active, killed …)
    ready: bool
    size_bytes: int | None = None


@dataclass(frozen=True)
class VolumeView:
    """One observation of a kept disk. `users`: who still uses it, in words ("VirtualMachine vm2"); a reclaim
    deletes nothing while this is not empty (the seed: release a volume only after the old writer stopped)."""

    ref: str
    size_gb: int
    status: str
    users: tuple[str, ...] = ()
    deleting: bool = False


@dataclass(frozen=True)
class DataVolume:
    """An extra blank disk asked for at create, beside the root disk (the request's `volumes`)."""

    size_gb: int
    name: str = ""  # the user's label, "" for none


@dataclass(frozen=True)
class CreateRequest:
    instance_id: str
    name: str
    flavor_id: str
    image: str
    user_data: str = ""  # a #cloud-config document (resources.access: the owner's SSH keys), "" for none
    volumes: tuple[DataVolume, ...] = ()  # blank data volumes made and attached with the server


class InstanceBackend:
    """Each write call only asks; the services poll `server()` until the post-condition holds."""

    has_block_storage: bool

    def flavor(self, name: str) -> FlavorView:
        raise NotImplementedError

    def flavor_fitting(self, *, vcpus: int, memory_mb: int) -> FlavorView:
        """The smallest flavor (or VM size) with at least these resources."""
        raise NotImplementedError

    def image_ref(self, name: str) -> str:
        raise NotImplementedError

    def flavors(self) -> list[FlavorView]:
        """Every flavor (or VM size) the cloud offers, smallest first: the launch form's size list."""
        raise NotImplementedError

    def images(self) -> list[tuple[str, str]]:
        """(value for image_ref, label) of the bootable images a new instance may use; [] when any
        reference is accepted (KubeVirt without a site image list: a container-disk reference)."""
        raise NotImplementedError

    def create(self, request: CreateRequest) -> str:
        """Ask for the server; returns its id. Idempotent on `instance_id` (adopts a server already made)."""
        raise NotImplementedError

    def server_made_for(self, instance_id: str) -> str | None:
        """The id of the server a create call made for `instance_id`, if the cloud has it: a call whose answer
        was lost may have made it all the same (services/run.py adopts it)."""
        raise NotImplementedError

    def server(self, server_id: str) -> ServerView | None:
        """None when the cloud has no such server (deleted, maybe behind CloudPivot's back)."""
        raise NotImplementedError

    def servers(self) -> dict[str, ServerView]:
        """Every server CloudPivot tagged on this connection, by id: one list call."""
        raise NotImplementedError

    def start(self, server_id: str) -> None:
        raise NotImplementedError

    def stop(self, server_id: str) -> None:
        raise NotImplementedError

    def reboot(self, server_id: str, *, hard: bool) -> None:
        raise NotImplementedError

    def pause(self, server_id: str) -> None:
        raise NotImplementedError

    def unpause(self, server_id: str) -> None:
        raise NotImplementedError

    def suspend(self, server_id: str) -> None:
        raise NotImplementedError

    def resume(self, server_id: str) -> None:
        raise NotImplementedError

    def snapshot(self, server_id: str, *, name: str, metadata: dict[str, str]) -> str:
        """Ask for a disk snapshot; returns the image id."""
        raise NotImplementedError

    def snapshot_image(self, made_as: str, *, name: str) -> str | None:
        """The id of the image a snapshot call made as CloudPivot snapshot `made_as` (named `name`), if the cloud
        has it: a call whose answer was lost may have made it all the same (services/run.py adopts it)."""
        raise NotImplementedError

    def image(self, image_id: str) -> ImageView | None:
        raise NotImplementedError

    def delete_image(self, image_id: str) -> None:
        raise NotImplementedError

    def image_volume_snapshots(self, image_id: str) -> dict[str, str]:
        """The block-storage snapshots an image boots from that still exist, each with its status ({}: none;
        OpenStack: a volume-booted server's snapshot image names its root volume's Cinder snapshot)."""
        return {}

    def delete_image_volume_snapshots(self, image_id: str) -> dict[str, str]:
        """Ask for those snapshots' delete (not waiting); returns them as they were found before."""
        return {}

    def rebuild(self, server_id: str, *, image_id: str) -> None:
        raise NotImplementedError

    def resize(self, server_id: str, *, flavor_id: str) -> None:
        raise NotImplementedError

    def confirm_resize(self, server_id: str) -> None:
        raise NotImplementedError

    def delete(self, server_id: str) -> None:
        raise NotImplementedError

    def console_log(self, server_id: str, *, lines: int) -> str:
        raise NotImplementedError

    def action_failure(self, server_id: str, action: str) -> str:
        """Words for why the cloud gave up on an action it had accepted ("" if it did not say so)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ optional, with their defaults
    def refusal(self, instance: Any, action: str, params: dict[str, Any]) -> tuple[str, str, str] | None:
        """What this cloud cannot do, asked before an Operation exists: (kind, field, message), or None."""
        return None

    # Delete keeping volumes. A backend whose delete can take a disk along unless done in a safe order says so:
    # the runner stops the server first (the seed: a volume is let go only after its writer has stopped),
    # deletes, and then checks every volume read before the delete is still there.
    stops_before_delete: bool = False

    def volumes_to_keep(self, server_id: str) -> list[str]:
        """The server's persistent volumes a delete keeping volumes must leave behind ([]: nothing to check)."""
        return []

    def lost_volumes(self, server_id: str, volumes: list[str]) -> list[str]:
        """After the delete: which of `volumes` (volumes_to_keep's answer) are gone or going."""
        return []

    # Kept volumes (resources.services.volumes): read one, and delete one once nothing uses it. A backend that
    # can (deletes_volumes) also purges an instance's volumes on delete (`volumes: purge`).
    deletes_volumes: bool = False

    def volume(self, ref: str) -> VolumeView | None:
        """A kept volume as the cloud shows it now (None: gone), with whatever still uses it."""
        raise Unsupported("this cloud's volumes cannot be read by CloudPivot yet")

    def delete_volume(self, ref: str) -> None:
        """Ask the cloud to delete a kept volume (already gone is done); the caller checked it is unused."""
        raise Unsupported("this cloud's volumes cannot be deleted by CloudPivot yet")

    def root_volume(self, server_id: str, instance_id: str) -> str:
        """The persistent volume a new server boots from, once it runs ("": an ephemeral root disk)."""
        return ""

    def keep_stopped(self, server_id: str) -> None:
        """The guest stopped itself: make stopped the cloud's own desired state too (nothing to do on Nova,
        which never restarts a SHUTOFF server by itself)."""

    # Readiness (resources/services/readiness.py): Running is the hypervisor's word, ready the guest's.
    def boot_baseline(self, server_id: str) -> str:
        """What the current boot left behind, read just before a (re)boot is asked for, so that the next
        readiness() can tell this boot's evidence from an earlier boot's ("": nothing to tell apart)."""
        return ""

    def readiness(self, view: ServerView, *, baseline: str) -> Readiness:
        """Is the guest of this running server up? Each cloud says what it can see."""
        return Readiness(False, f"waiting: the {view.source} backend has no way to see the guest")

    def image_snapshot_ref(self, image_id: str) -> str:
        """The CloudPivot snapshot a bootable image was made as ("" if none, or no bootable snapshot images)."""
        return ""
