"""What the orphan reconciler sees of a cloud: the resources carrying CloudPivot's marks, as plain data.

Each cloud kind has one small listing module (orphans/listers/openstack.py, kubernetes.py) that answers
with `CloudItem`s. A listing returns only what carries *this* installation's tag or label; a read by id
(`read`) answers whatever the cloud holds under that id, with `ours` saying whether the mark is there,
so an action re-checks the mark at the moment it acts instead of trusting a stored report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

PROTECTED_TAG = "cloudpivot-protected"  # Nova/Glance tag; metadata/property `cloudpivot_protected=true` too
PROTECTED_PROPERTY = "cloudpivot_protected"
PROTECTED_LABEL = "cloudpivot.io/protected"  # Kubernetes label or annotation, value "true"
TRUE_WORDS = {"true", "1", "yes"}

# Kinds of cloud resources the reconciler knows: Nova/Glance/Cinder ones, and Kubernetes Jobs and KubeVirt objects.
SERVER, IMAGE, VOLUME, JOB = "server", "image", "volume", "job"
VM, VM_SNAPSHOT, DATA_VOLUME = "vm", "vm_snapshot", "data_volume"


@dataclass(frozen=True)
class CloudItem:
    kind: str  # SERVER, IMAGE, VOLUME, JOB, VM, VM_SNAPSHOT or DATA_VOLUME
    ref: str  # the cloud's id: a Nova/Glance/Cinder UUID, or a Kubernetes object's name (in the namespace)
    name: str
    status: str
    ours: bool  # carries this installation's tag/label (and, where the cloud records it, installation metadata)
    owner: dict[str, str] = field(default_factory=dict)  # CloudPivot's marks: instance / attempt / task / source
    protected_reason: str = ""  # why the cloud's own marks forbid a delete ("" when none)
    uid: str = ""  # the Kubernetes uid, a precondition for a delete of exactly this object
    evidence: dict[str, Any] = field(default_factory=dict)


class TaggedLister(Protocol):
    """One cloud kind's listing: `items()` raises BackendError when the cloud does not answer."""

    notes: list[str]  # what could not be listed and why (e.g. no block storage), shown with the report
    instance_kind: str  # the kind an Instance's server is in this cloud (SERVER, VM)
    snapshot_kind: str  # the kind a Snapshot's image is in this cloud (IMAGE, VM_SNAPSHOT)

    def items(self) -> list[CloudItem]: ...
    def read(self, kind: str, ref: str) -> CloudItem | None: ...
    def delete(self, item: CloudItem) -> None: ...


def is_true(value: Any) -> bool:
    return str(value or "").strip().lower() in TRUE_WORDS
