"""Persistent instances as KubeVirt VirtualMachines (`kubevirt.io/v1`) on a `kubernetes` connection.

The API client, credentials, error words and installation label come from the Kubernetes package's
public client (clusters.backends.kubernetes.KubeClient), so tasks and VMs speak to a cluster the same
way. Each write only asks (a spec patch, a subresource PUT, a snapshot or restore object); whether it
happened is seen through `server()`, which reads the VirtualMachine's status as KubeVirt's controllers write it.

Connection options (docs/backends/kubevirt.md):

- `vm_flavors`: named sizes, `{"small": {"vcpus": 1, "memory_mb": 2048}}` (default: small/medium/large).
  A "flavor" here is a size the site defines on the connection, not KubeVirt's instancetype API: the
  portal's quotas need the numbers before anything is created, and a connection option needs no CRD.
- `vm_images`: optional names for container-disk images, `{"fedora": "quay.io/containerdisks/fedora:40"}`;
  when set, only these names are accepted; when not, any container image reference is.
- `vm_root_disk`: `"containerdisk"` (default: an ephemeral root disk straight from the image) or
  `{"size_gb": 10, "storage_class": "..."}`: a DataVolume imported from the image by CDI, which
  outlives the VM on delete and is what a VirtualMachineSnapshot captures. Only then can an instance ask for
  extra data volumes (`volumes` at create): blank DataVolumes of the same storage class, kept or purged with it.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from clusters.backends.kubernetes import LABEL_INSTALLATION, KubeApiError, KubeClient, label_value
from clusters.backends.kubernetes.kubevirt_support import snapshot_support
from clusters.models import CloudConnection
from resources.backends import kubevirt_volumes
from resources.backends.base import (
    BackendError,
    CreateRequest,
    FlavorView,
    ImageView,
    InstanceBackend,
    Readiness,
    ServerView,
    Unsupported,
    VolumeView,
)
from resources.backends.kubevirt_view import (
    ANNOTATION_FLAVOR,
    ANNOTATION_IMAGE,
    RUN_STRATEGY_RUNNING,
    persistent_volumes,
    run_strategy,
    vm_view,
    volume_refs,
)
from resources.choices import Action, InstanceStatus

S = InstanceStatus

GROUP, VERSION = "kubevirt.io", "v1"
SUBRESOURCES = "subresources.kubevirt.io"
SNAPSHOT_GROUP, SNAPSHOT_VERSION = "snapshot.kubevirt.io", "v1beta1"  # served since KubeVirt 1.3.0 (v1alpha1 before)
CDI_GROUP, CDI_VERSION = "cdi.kubevirt.io", "v1beta1"
LABEL_INSTANCE = "cloudpivot.io/instance"
LABEL_SNAPSHOT = "cloudpivot.io/snapshot"
ANNOTATION_NAME = "cloudpivot.io/instance-name"
LAST_RESTORE = "restore.kubevirt.io/lastRestoreUID"  # "<restore name>-<restore uid>", set by the restore controller
NOT_SERVED = "VM instances not available on this cluster"
ROOT_DISK = "rootdisk"
CLOUD_INIT_DISK = "cloudinitdisk"
DATA_DISK = "datadisk"  # + the volume's index: "datadisk0" (the user's label is an annotation, not a name)
ANNOTATION_LABEL = "cloudpivot.io/volume-name"

DEFAULT_FLAVORS: dict[str, dict[str, int]] = {
    "small": {"vcpus": 1, "memory_mb": 2048},
    "medium": {"vcpus": 2, "memory_mb": 4096},
    "large": {"vcpus": 4, "memory_mb": 8192},
}

_SNAPSHOT_NAME = re.compile(r"^cps-[0-9a-f]{32}$")
_IMAGE_REFERENCE = re.compile(
    r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)


def vm_name(instance_id: str) -> str:
    """The VirtualMachine's name: the instance id, so a retried create finds the VM it already made."""
    return f"cpi-{instance_id.replace('-', '')}"


class KubeVirtInstances(InstanceBackend):
    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.client = KubeClient(connection)  # its ApiClient, credentials, call wrapper and error words
        self.namespace = self.client.namespace
        self.options = self.client.options
        self.installation = self.client.installation

    # ------------------------------------------------------------------ capability
    def require_served(self) -> None:
        """Unsupported (NOT_SERVED) when API discovery does not list kubevirt.io; other errors pass through."""
        if not self.client.serves_api_group(GROUP):
            raise Unsupported(NOT_SERVED)

    def refusal(self, instance: Any, action: str, params: dict[str, Any]) -> tuple[str, str, str] | None:
        """What KubeVirt cannot do, asked before an Operation exists: (kind, field, message) or None.

        kind is "unsupported" (no equivalent here) or "invalid_state" (KubeVirt forbids it now).
        `instance` is None for a create (from a snapshot: `params["snapshot"]`).
        """
        if action == Action.CREATE:
            return ("unsupported", "snapshot", _NO_NEW_FROM_SNAPSHOT) if params.get("snapshot") else None
        if action in (Action.SNAPSHOT, Action.RESTORE):
            support = snapshot_support(self.client)  # KubeVirt >= 1.3.0, and the Snapshot gate before 1.9
            if support.available is False:
                return ("unsupported", "action", support.message)
        if action in (Action.SUSPEND, Action.RESUME):
            return ("unsupported", "action", _NO_SUSPEND)
        if action == Action.RESIZE:
            return ("unsupported", "action", _NO_RESIZE)
        if action == Action.REBOOT and instance.status != S.RUNNING:
            return (
                "invalid_state",
                "action",
                f"KubeVirt restarts only a running VirtualMachine; instance {instance.name} is {instance.status}",
            )
        if action == Action.RESTORE and instance.status != S.STOPPED:
            return (
                "invalid_state",
                "action",
                f"KubeVirt restores only a stopped VirtualMachine; instance {instance.name} is {instance.status}: "
                "stop it first, then restore",
            )
        if action == Action.SNAPSHOT and instance.server_id:
            vm = self._vm(instance.server_id)
            if vm is not None and not persistent_volumes(vm):
                return ("unsupported", "action", _NO_SNAPSHOT_OF_CONTAINERDISK)
        return None

    # ------------------------------------------------------------------ reads
    @property
    def has_block_storage(self) -> bool:
        """Whether new VMs get a DataVolume root disk (kept on delete) rather than an ephemeral containerDisk."""
        return isinstance(self.options.get("vm_root_disk"), dict)

    def flavor(self, name: str) -> FlavorView:
        flavors = self.options.get("vm_flavors") or DEFAULT_FLAVORS
        size = flavors.get(name)
        if not isinstance(size, dict):
            raise BackendError(
                f"the {self.connection.cloud_id} cloud has no VM flavor {name!r}; "
                f"flavors: {', '.join(sorted(flavors))}",
                kind="not_found",
            )
        disk = self.options["vm_root_disk"].get("size_gb", 0) if self.has_block_storage else 0
        return FlavorView(
            id=name,
            name=name,
            vcpus=int(size.get("vcpus", 1)),
            memory_mb=int(size.get("memory_mb", 1024)),
            disk_gb=int(size.get("disk_gb", disk) if self.has_block_storage else 0),
        )

    def flavor_fitting(self, *, vcpus: int, memory_mb: int) -> FlavorView:
        """The smallest named size with at least this many vCPU and MB, as on OpenStack."""
        sizes = [self.flavor(name) for name in (self.options.get("vm_flavors") or DEFAULT_FLAVORS)]
        fitting = [size for size in sizes if size.vcpus >= vcpus and size.memory_mb >= memory_mb]
        if not fitting:
            raise BackendError(
                f"the {self.connection.cloud_id} cloud has no VM flavor with at least {vcpus} vCPU and {memory_mb} MB",
                kind="not_found",
            )
        return min(fitting, key=lambda size: (size.vcpus, size.memory_mb, size.disk_gb, size.name))

    def flavors(self) -> list[FlavorView]:
        sizes = [self.flavor(name) for name in (self.options.get("vm_flavors") or DEFAULT_FLAVORS)]
        return sorted(sizes, key=lambda size: (size.vcpus, size.memory_mb, size.disk_gb, size.name))

    def images(self) -> list[tuple[str, str]]:
        """The site's named VM images (`vm_images`), if it lists any; else any container-disk reference goes."""
        images = self.options.get("vm_images") or {}
        return [(name, f"{name} ({images[name]})") for name in sorted(images)]

    def image_ref(self, name: str) -> str:
        images = self.options.get("vm_images") or {}
        if images:
            if name not in images:
                raise BackendError(
                    f"the {self.connection.cloud_id} cloud has no VM image {name!r}; "
                    f"images: {', '.join(sorted(images))}",
                    kind="not_found",
                )
            return images[name]
        if not _IMAGE_REFERENCE.match(name):
            raise BackendError(
                f"{name!r} is not a container image reference (e.g. quay.io/containerdisks/fedora:40); "
                "KubeVirt boots VMs from container-disk images",
                kind="invalid_spec",
            )
        return name

    def server(self, server_id: str) -> ServerView | None:
        vm = self._vm(server_id)
        if vm is None:
            return None
        vmi = self._get(GROUP, VERSION, "virtualmachineinstances", server_id)
        return vm_view(vm, restored_from=self._restored_from(vm), vmi=vmi)

    def servers(self) -> dict[str, ServerView]:
        items = self.client.objects(
            GROUP,
            VERSION,
            "virtualmachines",
            what="listing VirtualMachines",
            label_selector=f"{self.client.selector},{LABEL_INSTANCE}",
        )
        vmis = self.client.objects(
            GROUP,
            VERSION,
            "virtualmachineinstances",
            what="listing VirtualMachineInstances",
            label_selector=f"{self.client.selector},{LABEL_INSTANCE}",
        )
        by_name = {vmi["metadata"]["name"]: vmi for vmi in vmis}
        return {vm["metadata"]["name"]: vm_view(vm, vmi=by_name.get(vm["metadata"]["name"])) for vm in items}

    def image(self, image_id: str) -> ImageView | None:
        snapshot = self._get(SNAPSHOT_GROUP, SNAPSHOT_VERSION, "virtualmachinesnapshots", image_id)
        if snapshot is None:
            return None
        status = snapshot.get("status") or {}
        phase = status.get("phase") or "Pending"
        if phase == "Failed":
            error = (status.get("error") or {}).get("message") or "KubeVirt gave no message"
            raise BackendError(f"the VirtualMachineSnapshot {image_id} failed: {error}", kind="invalid_spec")
        return ImageView(id=image_id, status=phase, ready=bool(status.get("readyToUse")), size_bytes=None)

    def console_log(self, server_id: str, *, lines: int) -> str:
        raise Unsupported(
            "KubeVirt has no stored console log to read: its serial console is a live connection "
            f"(virtctl console {server_id} -n {self.namespace})"
        )

    def boot_baseline(self, server_id: str) -> str:
        """The current VMI's uid: a restart makes a new VMI, whose agent is the one to wait for."""
        vmi = self._get(GROUP, VERSION, "virtualmachineinstances", server_id)
        return str(((vmi or {}).get("metadata") or {}).get("uid") or "")

    def readiness(self, view: ServerView, *, baseline: str) -> Readiness:
        """Ready when virt-handler reports this boot's guest agent connected (VMI condition AgentConnected)."""
        uid = view.evidence.get("vmi_uid") or ""
        if view.evidence.get("agent_connected") and uid and uid != baseline:
            return Readiness(True, f"the guest agent connected ({view.source}: the VMI's AgentConnected condition)")
        return Readiness(False, f"waiting for the guest agent ({view.source}: the VMI's AgentConnected condition)")

    # ------------------------------------------------------------------ writes (each only asks)
    def create(self, request: CreateRequest) -> str:
        name = vm_name(request.instance_id)
        if _SNAPSHOT_NAME.match(request.image) and self._get(
            SNAPSHOT_GROUP, SNAPSHOT_VERSION, "virtualmachinesnapshots", request.image
        ):
            raise Unsupported(_NO_NEW_FROM_SNAPSHOT)  # a snapshot's name is no container image
        body = self.manifest(request)
        try:
            self.client.create_object(GROUP, VERSION, "virtualmachines", body, what=f"creating VirtualMachine {name}")
        except KubeApiError as exc:
            if exc.status != 409:
                raise
            if self.server_made_for(request.instance_id) is None:
                raise BackendError(
                    f"a VirtualMachine named {name} already exists in namespace {self.namespace} but was not "
                    "created by this CloudPivot installation for this instance; it was left alone",
                    kind="invalid_spec",
                ) from None
        return name  # adopted when an earlier try already made it

    def server_made_for(self, instance_id: str) -> str | None:
        """The VM named from the instance id, if its labels say this installation made it for that instance."""
        name = vm_name(instance_id)
        labels = ((self._vm(name) or {}).get("metadata") or {}).get("labels") or {}
        ours = labels.get(LABEL_INSTANCE) == label_value(instance_id) and labels.get(LABEL_INSTALLATION) == (
            self.installation
        )
        return name if ours else None

    def manifest(self, request: CreateRequest) -> dict[str, Any]:
        """The VirtualMachine for a create request: our labels, the flavor's size, the image as root disk."""
        name = vm_name(request.instance_id)
        flavor = self.flavor(request.flavor_id)
        labels = {LABEL_INSTALLATION: self.installation, LABEL_INSTANCE: label_value(request.instance_id)}
        spec: dict[str, Any] = {
            "runStrategy": RUN_STRATEGY_RUNNING,  # a guest that shuts itself down stays off (kubevirt_view)
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "domain": {
                        "cpu": {"cores": flavor.vcpus},
                        "memory": {"guest": f"{flavor.memory_mb}Mi"},
                        "resources": {"requests": {"memory": f"{flavor.memory_mb}Mi"}},
                        "devices": {"disks": [{"name": ROOT_DISK, "disk": {"bus": "virtio"}}]},
                    },
                    "volumes": [],
                },
            },
        }
        volumes = spec["template"]["spec"]["volumes"]
        if self.has_block_storage:
            spec["dataVolumeTemplates"] = [
                {
                    "metadata": {"name": f"{name}-root", "labels": dict(labels)},
                    "spec": {
                        "source": {"registry": {"url": f"docker://{request.image}"}},
                        "storage": self._storage(flavor.disk_gb or 10),
                    },
                }
            ]
            volumes.append({"name": ROOT_DISK, "dataVolume": {"name": f"{name}-root"}})
        else:
            volumes.append({"name": ROOT_DISK, "containerDisk": {"image": request.image}})
        for index, volume in enumerate(request.volumes):  # blank data disks: DataVolumes like the root's
            disk, data_volume = f"{DATA_DISK}{index}", f"{name}-{DATA_DISK}{index}"
            spec.setdefault("dataVolumeTemplates", []).append(
                {
                    "metadata": {
                        "name": data_volume,
                        "labels": dict(labels),
                        "annotations": {ANNOTATION_LABEL: volume.name},
                    },
                    "spec": {"source": {"blank": {}}, "storage": self._storage(volume.size_gb)},
                }
            )
            spec["template"]["spec"]["domain"]["devices"]["disks"].append({"name": disk, "disk": {"bus": "virtio"}})
            volumes.append({"name": disk, "dataVolume": {"name": data_volume}})
        if request.user_data:  # the owner's SSH keys (resources.access): cloud-init's NoCloud source
            spec["template"]["spec"]["domain"]["devices"]["disks"].append(
                {"name": CLOUD_INIT_DISK, "disk": {"bus": "virtio"}}
            )
            volumes.append({"name": CLOUD_INIT_DISK, "cloudInitNoCloud": {"userData": request.user_data}})
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "VirtualMachine",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    ANNOTATION_FLAVOR: flavor.name,
                    ANNOTATION_IMAGE: request.image,
                    ANNOTATION_NAME: request.name,
                },
            },
            "spec": spec,
        }

    def _storage(self, size_gb: int) -> dict[str, Any]:
        """A DataVolume's storage: the size, and the storage class of the connection's vm_root_disk if named."""
        storage: dict[str, Any] = {"resources": {"requests": {"storage": f"{size_gb}Gi"}}}
        root = self.options.get("vm_root_disk")
        if isinstance(root, dict) and root.get("storage_class"):
            storage["storageClassName"] = root["storage_class"]
        return storage

    def start(self, server_id: str) -> None:
        self._run_strategy(server_id, RUN_STRATEGY_RUNNING, "starting")

    def stop(self, server_id: str) -> None:
        self._run_strategy(server_id, "Halted", "stopping")

    def reboot(self, server_id: str, *, hard: bool) -> None:
        """The VM's `restart` subresource: a new VMI (a cold boot of the guest).

        Soft: the guest gets its termination grace period to shut down. Hard: grace period 0, the
        VMI is killed at once (power cut), as `virtctl restart --force --grace-period=0` does.
        """
        body = {"gracePeriodSeconds": 0} if hard else {}
        self._subresource("virtualmachines", server_id, "restart", body, "restarting the VM")

    def pause(self, server_id: str) -> None:
        self._subresource("virtualmachineinstances", server_id, "pause", {}, "pausing the VM")

    def unpause(self, server_id: str) -> None:
        self._subresource("virtualmachineinstances", server_id, "unpause", {}, "unpausing the VM")

    def suspend(self, server_id: str) -> None:
        raise Unsupported(_NO_SUSPEND)

    def resume(self, server_id: str) -> None:
        raise Unsupported(_NO_SUSPEND)

    def snapshot(self, server_id: str, *, name: str, metadata: dict[str, str]) -> str:
        snapshot_id = metadata.get("cloudpivot_snapshot") or uuid.uuid4().hex
        snapshot_name = _snapshot_name(snapshot_id)
        vm = self._vm(server_id)
        if vm is None:
            raise BackendError(f"VirtualMachine {server_id} is not in namespace {self.namespace}", kind="not_found")
        if not persistent_volumes(vm):
            raise Unsupported(_NO_SNAPSHOT_OF_CONTAINERDISK)
        body = {
            "apiVersion": f"{SNAPSHOT_GROUP}/{SNAPSHOT_VERSION}",
            "kind": "VirtualMachineSnapshot",
            "metadata": {
                "name": snapshot_name,
                "labels": {
                    LABEL_INSTALLATION: self.installation,
                    LABEL_INSTANCE: (vm["metadata"].get("labels") or {}).get(LABEL_INSTANCE, ""),
                    LABEL_SNAPSHOT: label_value(snapshot_id),
                },
                "annotations": {"cloudpivot.io/snapshot-name": name},
            },
            "spec": {"source": {"apiGroup": GROUP, "kind": "VirtualMachine", "name": server_id}},
        }
        try:
            self.client.create_object(
                SNAPSHOT_GROUP,
                SNAPSHOT_VERSION,
                "virtualmachinesnapshots",
                body,
                what=f"creating VirtualMachineSnapshot {snapshot_name}",
            )
        except KubeApiError as exc:
            if exc.status != 409:  # 409: an earlier try made it (the name is the snapshot's id)
                raise
        return snapshot_name

    def snapshot_image(self, made_as: str, *, name: str) -> str | None:
        snapshot_name = _snapshot_name(made_as)
        found = self._get(SNAPSHOT_GROUP, SNAPSHOT_VERSION, "virtualmachinesnapshots", snapshot_name)
        return snapshot_name if found is not None else None

    def delete_image(self, image_id: str) -> None:
        try:
            self.client.delete_object(
                SNAPSHOT_GROUP,
                SNAPSHOT_VERSION,
                "virtualmachinesnapshots",
                image_id,
                what=f"deleting VirtualMachineSnapshot {image_id}",
            )
        except KubeApiError as exc:
            if exc.status != 404:
                raise

    def rebuild(self, server_id: str, *, image_id: str) -> None:
        """Restore the VM from a VirtualMachineSnapshot (a VirtualMachineRestore); only a stopped VM."""
        vm = self._vm(server_id)
        if vm is None:
            raise BackendError(f"VirtualMachine {server_id} is not in namespace {self.namespace}", kind="not_found")
        printable = (vm.get("status") or {}).get("printableStatus") or "no status"
        if printable != "Stopped" or run_strategy(vm) != "Halted":
            raise Unsupported(
                f"KubeVirt restores only a stopped VirtualMachine; {server_id} is {printable}: stop it first"
            )
        restore = f"cpr-{uuid.uuid4().hex}"
        body = {
            "apiVersion": f"{SNAPSHOT_GROUP}/{SNAPSHOT_VERSION}",
            "kind": "VirtualMachineRestore",
            "metadata": {
                "name": restore,
                "labels": {
                    LABEL_INSTALLATION: self.installation,
                    LABEL_INSTANCE: (vm["metadata"].get("labels") or {}).get(LABEL_INSTANCE, ""),
                },
            },
            "spec": {
                "target": {"apiGroup": GROUP, "kind": "VirtualMachine", "name": server_id},
                "virtualMachineSnapshotName": image_id,
            },
        }
        self.client.create_object(
            SNAPSHOT_GROUP,
            SNAPSHOT_VERSION,
            "virtualmachinerestores",
            body,
            what=f"creating VirtualMachineRestore {restore}",
        )

    def resize(self, server_id: str, *, flavor_id: str) -> None:
        raise Unsupported(_NO_RESIZE)

    def confirm_resize(self, server_id: str) -> None:
        raise Unsupported(_NO_RESIZE)

    # delete keeping volumes: stop, delete with propagationPolicy Orphan, then check the disks survived.
    # Releasing the DataVolumes first and then deleting (the old order) can lose them: KubeVirt's VM
    # controller re-adopts any unowned DataVolume its template names until it sees the VM being deleted,
    # so a sync between the two requests hands the disk back to the VM and the garbage collector deletes it.
    stops_before_delete = True

    def volumes_to_keep(self, server_id: str) -> list[str]:
        vm = self._vm(server_id)
        return volume_refs(vm) if vm is not None else []

    def delete(self, server_id: str) -> None:
        """DELETE the VM (UID precondition) with propagationPolicy Orphan: the garbage collector removes
        the VM's ownerReference from its DataVolumes before the VM goes, and never deletes them; the VMI
        goes through KubeVirt's own finalizer. While the VM has its deletionTimestamp the VM controller
        adopts nothing, so no sync can hand a disk back to it."""
        vm = self._vm(server_id)
        if vm is None:
            return
        try:
            self.client.delete_object(
                GROUP,
                VERSION,
                "virtualmachines",
                server_id,
                what=f"deleting VirtualMachine {server_id} (keeping its volumes)",
                uid=vm["metadata"].get("uid") or "",
                propagation="Orphan",
            )
        except KubeApiError as exc:
            if exc.status not in (404, 409):  # 409: the name is another VM's now; ours is gone
                raise

    def lost_volumes(self, server_id: str, volumes: list[str]) -> list[str]:
        """Of the volumes a delete kept, those not safe now the VM is gone: missing, being deleted, or still
        owned by the deleted VM (the garbage collector would take them next). `volumes`: volumes_to_keep's."""
        lost = []
        for ref in volumes:
            kind, name = ref.split("/", 1)
            if kind == "datavolume":
                found = self._get(CDI_GROUP, CDI_VERSION, "datavolumes", name)
            else:
                found = self.client.pvc(name)
            metadata = (found or {}).get("metadata") or {}
            owned = any(
                ref.get("kind") == "VirtualMachine" and ref.get("name") == server_id
                for ref in metadata.get("ownerReferences") or []
            )
            if found is None or metadata.get("deletionTimestamp") or owned:
                lost.append(ref)
        return lost

    def keep_stopped(self, server_id: str) -> None:
        """The guest stopped itself: make that the VM's own desired state too (runStrategy Halted), so a later
        start (a new boot id) is the same PATCH as any start, and nothing boots the guest meanwhile."""
        self._run_strategy(server_id, "Halted", "keeping stopped")

    deletes_volumes = True

    def volume(self, ref: str) -> VolumeView | None:
        return kubevirt_volumes.volume(self.client, ref)

    def delete_volume(self, ref: str) -> None:
        kubevirt_volumes.delete(self.client, ref)

    # ------------------------------------------------------------------ helpers
    def _get(self, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
        return self.client.object(group, version, plural, name)

    def _vm(self, name: str) -> dict[str, Any] | None:
        return self._get(GROUP, VERSION, "virtualmachines", name)

    def _restored_from(self, vm: dict[str, Any]) -> str:
        """The snapshot of the VM's last *completed* restore (KubeVirt's lastRestoreUID annotation), or ""."""
        value = (vm["metadata"].get("annotations") or {}).get(LAST_RESTORE) or ""
        if len(value) < 38:
            return ""
        restore = self._get(SNAPSHOT_GROUP, SNAPSHOT_VERSION, "virtualmachinerestores", value[:-37])
        if restore is None or not (restore.get("status") or {}).get("complete"):
            return ""
        return (restore.get("spec") or {}).get("virtualMachineSnapshotName") or ""

    def _run_strategy(self, server_id: str, strategy: str, what: str) -> None:
        self.client.patch_object(
            GROUP,
            VERSION,
            "virtualmachines",
            server_id,
            {"spec": {"runStrategy": strategy}},
            what=f"{what} VirtualMachine {server_id} (runStrategy {strategy})",
        )

    def _subresource(self, plural: str, name: str, verb: str, body: dict[str, Any], what: str) -> None:
        """PUT /apis/subresources.kubevirt.io/v1/namespaces/{ns}/{plural}/{name}/{verb} (virt-api)."""
        self.client.put_subresource(SUBRESOURCES, VERSION, plural, name, verb, body, what=what)


_NO_NEW_FROM_SNAPSHOT = (
    "a new instance from a KubeVirt snapshot is not offered yet: restore the snapshot onto its own "
    "instance (stopped) instead"
)
_NO_SUSPEND = (
    "KubeVirt has no suspend (saving the guest's memory and freeing the host): pause keeps the guest in memory, "
    "stop shuts it down"
)
_NO_RESIZE = (
    "resize is not offered on KubeVirt instances yet: the portal's resize is Nova's resize-and-confirm; "
    "create a new instance with the flavor you need"
)
_NO_SNAPSHOT_OF_CONTAINERDISK = (
    "this instance's root disk is a containerDisk (ephemeral, rebuilt from its image at every boot): "
    "KubeVirt cannot snapshot it; instances with a DataVolume root disk (the connection's vm_root_disk) can be"
)


def _snapshot_name(snapshot_id: str) -> str:
    """The VirtualMachineSnapshot's name is the CloudPivot snapshot's id: a second call for it gets a 409."""
    return f"cps-{snapshot_id.replace('-', '')}"
