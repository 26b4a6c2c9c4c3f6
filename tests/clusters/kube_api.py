"""The names the loopback Kubernetes API (kube_fixture.py, kube_kubevirt.py, kube_cluster.py) and its tests share."""

from __future__ import annotations

import datetime as dt
from typing import Any

import kmock

JOBS = kmock.resource("batch", "v1", "jobs")
PODS = kmock.resource("", "v1", "pods")
NODES = kmock.resource("", "v1", "nodes")
RESOURCE_QUOTAS = kmock.resource("", "v1", "resourcequotas")
LIMIT_RANGES = kmock.resource("", "v1", "limitranges")
NAMESPACES = kmock.resource("", "v1", "namespaces")
PVCS = kmock.resource("", "v1", "persistentvolumeclaims")
REVIEWS = kmock.resource("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
VMS = kmock.resource("kubevirt.io", "v1", "virtualmachines")
VMIS = kmock.resource("kubevirt.io", "v1", "virtualmachineinstances")
VM_SNAPSHOTS = kmock.resource("snapshot.kubevirt.io", "v1beta1", "virtualmachinesnapshots")
VM_RESTORES = kmock.resource("snapshot.kubevirt.io", "v1beta1", "virtualmachinerestores")
DATA_VOLUMES = kmock.resource("cdi.kubevirt.io", "v1beta1", "datavolumes")
KUBEVIRTS = kmock.resource("kubevirt.io", "v1", "kubevirts")  # the operator's CR: version and feature gates
VIRT_API = "subresources.kubevirt.io"
KUBEVIRT_GROUPS = {"kubevirt.io", VIRT_API, "snapshot.kubevirt.io", "cdi.kubevirt.io"}
VM_FINALIZER = "kubevirt.io/virtualMachineControllerFinalize"
SYSTEM_TOKEN = "system:controllers"  # what the simulated controllers and kubelet authenticate with
VERBS = {
    kmock.action.LIST: "list",
    kmock.action.WATCH: "watch",
    kmock.action.FETCH: "get",
    kmock.action.CREATE: "create",
    kmock.action.UPDATE: "patch",
    kmock.action.DELETE: "delete",
}
ALL_PERMISSIONS = None  # `permissions=None`: every request is allowed


def now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def nano_text(moment: dt.datetime, nanos: int) -> str:
    """RFC 3339 with nanoseconds and trailing zeros trimmed, as Go's RFC3339Nano (the kubelet's log stamps)."""
    fraction = f"{nanos:09d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def status_error(
    status: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=status, reason=reason, message=message, details=details or {})
