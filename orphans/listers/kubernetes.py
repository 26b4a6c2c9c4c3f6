"""Kubernetes resources CloudPivot labelled: the Jobs of batch-task attempts and, where the cluster serves
KubeVirt, the VirtualMachines of instances, their VirtualMachineSnapshots and the DataVolumes (root disks)
a VM delete keeps. All by the installation label, through the Kubernetes package's public client.

One LIST per kind per scan in the connection's namespace (plus one API discovery to learn whether
KubeVirt is served: without it there is nothing of its kinds to compare). A delete carries the object's
uid as a precondition, so one recreated under the same name meanwhile is never the one deleted.
"""

from __future__ import annotations

from typing import Any

from clusters.backends.base import BackendError
from clusters.backends.kubernetes import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, KubeApiError, KubeClient
from clusters.models import CloudConnection
from orphans.listers.base import DATA_VOLUME, JOB, PROTECTED_LABEL, VM, VM_SNAPSHOT, CloudItem, is_true
from resources.backends.kubevirt import (
    GROUP,
    LABEL_INSTANCE,
    LABEL_SNAPSHOT,
    SNAPSHOT_GROUP,
    SNAPSHOT_VERSION,
    VERSION,
)

CDI_GROUP, CDI_VERSION = "cdi.kubevirt.io", "v1beta1"
# kind → (API group, version, plural, words)
KUBEVIRT_KINDS: dict[str, tuple[str, str, str, str]] = {
    VM: (GROUP, VERSION, "virtualmachines", "VirtualMachines"),
    VM_SNAPSHOT: (SNAPSHOT_GROUP, SNAPSHOT_VERSION, "virtualmachinesnapshots", "VirtualMachineSnapshots"),
    DATA_VOLUME: (CDI_GROUP, CDI_VERSION, "datavolumes", "DataVolumes"),
}


class KubernetesTagged:
    instance_kind = VM  # what an Instance row expects in this cloud (the "missing" check)
    snapshot_kind = VM_SNAPSHOT

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.client = KubeClient(connection)
        self.namespace = self.client.namespace
        self.notes: list[str] = []

    def items(self) -> list[CloudItem]:
        jobs = self.client.jobs(label_selector=self.client.selector)
        found = [self._job(job) for job in jobs]
        if self.client.serves_api_group(GROUP):  # else no VMs can be there: nothing of KubeVirt's to compare
            for kind, (group, version, plural, words) in KUBEVIRT_KINDS.items():
                objects = self.client.objects(
                    group, version, plural, what=f"listing {words}", label_selector=self.client.selector
                )
                found += [self._kubevirt(kind, obj) for obj in objects]
        return [item for item in found if item.ours]  # the selector is the server's; checked again here

    def read(self, kind: str, ref: str) -> CloudItem | None:
        if kind == JOB:
            job = self.client.job(ref)
            return self._job(job) if job is not None else None
        if kind not in KUBEVIRT_KINDS:
            raise BackendError(f"the Kubernetes lister knows no {kind!r} resources", kind="invalid_spec")
        group, version, plural, _ = KUBEVIRT_KINDS[kind]
        try:
            obj = self.client.object(group, version, plural, ref)
        except KubeApiError as exc:
            if exc.status == 404:  # the group itself is not served (KubeVirt uninstalled): no such object
                return None
            raise
        return self._kubevirt(kind, obj) if obj is not None else None

    def delete(self, item: CloudItem) -> None:
        try:
            if item.kind == JOB:
                self.client.delete_job(item.ref, uid=item.uid)
            else:
                group, version, plural, _ = KUBEVIRT_KINDS[item.kind]
                self.client.delete_object(
                    group, version, plural, item.ref, what=f"deleting {item.kind} {item.ref}", uid=item.uid
                )
        except KubeApiError as exc:
            if exc.status != 404:  # already gone is what was asked
                raise

    # ------------------------------------------------------------------ objects → items
    def _job(self, job: dict[str, Any]) -> CloudItem:
        metadata = job.get("metadata") or {}
        labels = metadata.get("labels") or {}
        status = job.get("status") or {}
        conditions = [c.get("type") for c in status.get("conditions") or [] if str(c.get("status")) == "True"]
        return CloudItem(
            kind=JOB,
            ref=metadata.get("name", ""),
            name=metadata.get("name", ""),
            status=",".join(conditions) or ("Active" if status.get("active") else "Pending"),
            ours=labels.get(LABEL_INSTALLATION) == self.client.installation,
            owner={
                key: labels[label]
                for key, label in (("attempt", LABEL_ATTEMPT), ("task", LABEL_TASK))
                if labels.get(label)
            },
            protected_reason=_protected(metadata),
            uid=metadata.get("uid", ""),
            evidence=self._evidence(metadata) | {"active": status.get("active", 0)},
        )

    def _kubevirt(self, kind: str, obj: dict[str, Any]) -> CloudItem:
        metadata = obj.get("metadata") or {}
        labels = metadata.get("labels") or {}
        status = obj.get("status") or {}
        reasons = [_protected(metadata)]
        owners = [f"{o.get('kind')} {o.get('name')}" for o in metadata.get("ownerReferences") or []]
        if kind == DATA_VOLUME and owners:
            reasons.append(f"owned by {', '.join(owners)}")
        words = status.get("printableStatus") or status.get("phase") or ("ready" if status.get("readyToUse") else "")
        return CloudItem(
            kind=kind,
            ref=metadata.get("name", ""),
            name=(metadata.get("annotations") or {}).get("cloudpivot.io/instance-name") or metadata.get("name", ""),
            status=words or "unknown",
            ours=labels.get(LABEL_INSTALLATION) == self.client.installation,
            owner={
                key: labels[label]
                for key, label in (("instance", LABEL_INSTANCE), ("snapshot", LABEL_SNAPSHOT))
                if labels.get(label)
            },
            protected_reason="; ".join(filter(None, reasons)),
            uid=metadata.get("uid", ""),
            evidence=self._evidence(metadata) | ({"owners": owners} if owners else {}),
        )

    def _evidence(self, metadata: dict[str, Any]) -> dict[str, Any]:
        labels = metadata.get("labels") or {}
        return {
            "namespace": metadata.get("namespace", self.namespace),
            "labels": {k: v for k, v in labels.items() if k.startswith("cloudpivot.io/")},
            "created_at": metadata.get("creationTimestamp"),
        }


def _protected(metadata: dict[str, Any]) -> str:
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    if is_true(labels.get(PROTECTED_LABEL)) or is_true(annotations.get(PROTECTED_LABEL)):
        return f"labelled {PROTECTED_LABEL}"
    return ""
