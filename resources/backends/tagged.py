"""What the orphan reconciler sees of a cloud: the resources carrying CloudPivot's marks, as plain data.

Each cloud kind has one small listing module (openstack_tagged, kubernetes_tagged) that answers with
`CloudItem`s. A listing returns only what carries *this* installation's tag or label; a read by id
(`read`) answers whatever the cloud holds under that id, with `ours` saying whether the mark is there,
so an action re-checks the mark at the moment it acts instead of trusting a stored report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from clusters.backends.base import BackendError
from clusters.models import CloudConnection

PROTECTED_TAG = "cloudpivot-protected"  # Nova/Glance tag; metadata/property `cloudpivot_protected=true` too
PROTECTED_PROPERTY = "cloudpivot_protected"
PROTECTED_LABEL = "cloudpivot.io/protected"  # Kubernetes label or annotation, value "true"
TRUE_WORDS = {"true", "1", "yes"}

# Kinds of cloud resources the reconciler knows. KubeVirt VMs ("vm") join here with their lister.
SERVER, IMAGE, VOLUME, JOB = "server", "image", "volume", "job"


@dataclass(frozen=True)
class CloudItem:
    kind: str  # SERVER, IMAGE, VOLUME or JOB
    ref: str  # the cloud's id: a Nova/Glance/Cinder UUID, a Job's name (in the connection's namespace)
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

    def items(self) -> list[CloudItem]: ...
    def read(self, kind: str, ref: str) -> CloudItem | None: ...
    def delete(self, item: CloudItem) -> None: ...


def is_true(value: Any) -> bool:
    return str(value or "").strip().lower() in TRUE_WORDS


def tagged_lister(connection: CloudConnection) -> TaggedLister | None:
    """The lister of a connection's backend, None when its resources are not CloudPivot-tagged cloud objects."""
    if connection.backend == "openstack":
        from resources.backends.openstack_tagged import OpenStackTagged

        return OpenStackTagged(connection)
    if connection.backend == "kubernetes":
        from resources.backends.kubernetes_tagged import KubernetesTagged

        return KubernetesTagged(connection)
    return None  # `local` runs processes on this host: nothing is tagged in a cloud


__all__ = ["BackendError", "CloudItem", "TaggedLister", "tagged_lister"]
