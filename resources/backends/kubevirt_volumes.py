"""Kept KubeVirt disks (DataVolumes and PVCs a delete kept): their size, who still uses them, deleting them.

"Uses" is what KubeVirt itself would write through: a VirtualMachine whose template names the disk (its next
boot mounts it), a VirtualMachineInstance whose volumes name it (a guest running on it now), or a VM that owns
the DataVolume (the garbage collector deletes it with that VM). A reclaim deletes nothing while any of these
is seen (resources.services.volumes).
"""

from __future__ import annotations

import math
import re
from typing import Any

from clusters.backends.kubernetes import KubeApiError, KubeClient
from resources.backends.base import VolumeView

GROUP, VERSION = "kubevirt.io", "v1"
CDI_GROUP, CDI_VERSION = "cdi.kubevirt.io", "v1beta1"
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)([KMGTPE]i?)?$")
_FACTORS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_FACTORS |= {f"{unit}i": 1024 ** (i + 1) for i, unit in enumerate("KMGTPE")}


def size_gb(quantity: str) -> int:
    """A Kubernetes storage quantity ("5Gi", "500M") in whole GB (GiB for binary units), rounded up; 0 if unreadable."""
    match = _QUANTITY.match(str(quantity or "").strip())
    if not match:
        return 0
    number, unit = float(match.group(1)), match.group(2) or ""
    gib = 1024**3 if unit.endswith("i") or unit == "" else 10**9
    return max(1, math.ceil(number * _FACTORS[unit] / gib)) if number else 0


def _requested(spec: dict[str, Any]) -> str:
    for part in ("storage", "pvc"):
        requests = (((spec.get(part) or {}).get("resources") or {}).get("requests")) or {}
        if requests.get("storage"):
            return requests["storage"]
    return str(((spec.get("resources") or {}).get("requests") or {}).get("storage") or "")


def _names_in(volumes: list[dict[str, Any]]) -> set[str]:
    names = set()
    for volume in volumes or []:
        names.add((volume.get("dataVolume") or {}).get("name") or "")
        names.add((volume.get("persistentVolumeClaim") or {}).get("claimName") or "")
    return names - {""}


def users(client: KubeClient, name: str, owners: list[dict[str, Any]]) -> tuple[str, ...]:
    """Who uses the disk `name` (a DataVolume's PVC has its name): VMs naming it, VMIs running on it, owners."""
    found = [f"VirtualMachine {ref.get('name')} (owns it)" for ref in owners if ref.get("kind") == "VirtualMachine"]
    vms = client.objects(GROUP, VERSION, "virtualmachines", what="listing VirtualMachines")
    for vm in vms:
        volumes = (((vm.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
        if name in _names_in(volumes):
            found.append(f"VirtualMachine {vm['metadata']['name']}")
    vmis = client.objects(GROUP, VERSION, "virtualmachineinstances", what="listing VirtualMachineInstances")
    for vmi in vmis:
        if name in _names_in((vmi.get("spec") or {}).get("volumes") or []):
            found.append(f"VirtualMachineInstance {vmi['metadata']['name']}")
    return tuple(dict.fromkeys(found))


def volume(client: KubeClient, ref: str) -> VolumeView | None:
    kind, name = ref.split("/", 1)
    if kind == "datavolume":
        found = client.object(CDI_GROUP, CDI_VERSION, "datavolumes", name)
        if found is None:
            return None
        size, status = _requested(found.get("spec") or {}), (found.get("status") or {}).get("phase") or ""
    else:
        found = client.pvc(name)
        if found is None:
            return None
        status_block = found.get("status") or {}
        size = (status_block.get("capacity") or {}).get("storage") or _requested(found.get("spec") or {})
        status = status_block.get("phase") or ""
    metadata = found.get("metadata") or {}
    return VolumeView(
        ref=ref,
        size_gb=size_gb(size),
        status=status or "unknown",
        users=users(client, name, metadata.get("ownerReferences") or []),
        deleting=bool(metadata.get("deletionTimestamp")),
    )


def delete(client: KubeClient, ref: str) -> None:
    """DELETE the DataVolume (CDI deletes its PVC with it) or the PVC; 404 is done."""
    kind, name = ref.split("/", 1)
    try:
        if kind == "datavolume":
            client.delete_object(CDI_GROUP, CDI_VERSION, "datavolumes", name, what=f"deleting DataVolume {name}")
        else:
            client.call(
                f"deleting PersistentVolumeClaim {name}",
                client.core().delete_namespaced_persistent_volume_claim,
                name,
                client.namespace,
            )
    except KubeApiError as exc:
        if exc.status != 404:
            raise
