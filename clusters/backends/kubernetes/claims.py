"""Which PersistentVolumeClaims a project's tasks may mount, and which ones a project's readers may see.

All projects granted a connection share its namespace, so a claim name alone would let any task mount any
other project's data. The cluster's admin says which projects may use a claim with the annotation
`cloudpivot.io/projects: "alpha,beta"` (or `"*"`: every project granted the connection); a claim without it
is nobody's to mount (the safe default). The disks CloudPivot made for VM instances (a KubeVirt root
DataVolume and its claim, labelled `cloudpivot.io/instance`) are never mounted by a task, whatever the
annotation says: a running VM's disk mounted twice is corrupted, and a kept disk is an instance's data.
"""

from __future__ import annotations

from typing import Any

from clusters.backends.kubernetes.client import KubeApiError, KubeClient
from clusters.backends.kubernetes.labels import ANNOTATION_PROJECTS, LABEL_INSTANCE

CDI_GROUP, CDI_VERSION = "cdi.kubevirt.io", "v1beta1"


def claim_projects(pvc: dict[str, Any]) -> set[str]:
    """The project slugs (or "*") the claim's annotation names; empty when it names none."""
    text = ((pvc.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PROJECTS) or ""
    return {part.strip() for part in text.split(",") if part.strip()}


def marked_instance_disk(pvc: dict[str, Any]) -> bool:
    """Labelled as a CloudPivot instance's disk, or made from a DataVolume (what CDI makes for VMs), no call needed."""
    metadata = pvc.get("metadata") or {}
    owners = {owner.get("kind") for owner in metadata.get("ownerReferences") or []}
    return LABEL_INSTANCE in (metadata.get("labels") or {}) or bool(owners & {"DataVolume", "VirtualMachine"})


def instance_disk(client: KubeClient, pvc: dict[str, Any]) -> bool:
    """Whether the claim is a CloudPivot instance's disk: labelled so, or owned by a DataVolume labelled so.

    CDI may not copy a DataVolume's labels onto the claim it makes, so the owning DataVolume is read too
    (one call, only for a claim a DataVolume owns)."""
    metadata = pvc.get("metadata") or {}
    if LABEL_INSTANCE in (metadata.get("labels") or {}):
        return True
    for owner in metadata.get("ownerReferences") or []:
        if owner.get("kind") == "VirtualMachine":
            return True
        if owner.get("kind") == "DataVolume":
            try:
                volume = client.object(CDI_GROUP, CDI_VERSION, "datavolumes", owner.get("name", ""))
            except KubeApiError:
                volume = None
            if volume is None or LABEL_INSTANCE in ((volume.get("metadata") or {}).get("labels") or {}):
                return True  # a disk whose DataVolume cannot be told apart is refused, not guessed
    return False


def claim_errors(
    client: KubeClient, volumes: list[tuple[str, dict[str, Any]]], *, project: str
) -> list[dict[str, str]]:
    """Field errors (`volumes.N.claim`, `data.N.ref`: clusters.data_refs.pvc_volumes) for the claims project
    `project`'s task may not mount; one read per claim."""
    errors = []
    for field, volume in volumes:
        message = claim_refusal(client, volume["claim"], project=project)
        if message:
            errors.append({"field": field, "message": message})
    return errors


def claim_refusal(client: KubeClient, name: str, *, project: str) -> str:
    """Words for why the claim may not be mounted by the project's task ("" when it may)."""
    where = f"namespace {client.namespace} of the {client.connection.cloud_id} cloud"
    pvc = client.pvc(name)
    if pvc is None:
        return f"there is no PersistentVolumeClaim {name} in {where}"
    if instance_disk(client, pvc):
        return f"PersistentVolumeClaim {name} is the disk of a CloudPivot VM instance; tasks never mount instance disks"
    allowed = claim_projects(pvc)
    if "*" in allowed or project in allowed:
        return ""
    return (
        f"project {project} may not use PersistentVolumeClaim {name} in {where} (its {ANNOTATION_PROJECTS} "
        "annotation does not name the project; the cluster's admin sets it)"
    )
