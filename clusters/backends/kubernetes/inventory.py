"""Read-only views of a Kubernetes cloud: inventory (nodes, namespaces, PVCs, our pods) and permissions.

`permissions` asks the API server (SelfSubjectAccessReview) whether the connection's credentials may do
each thing CloudPivot needs (check_cloud prints the answers).
"""

from __future__ import annotations

from typing import Any

from clusters.backends.base import BackendError
from clusters.backends.kubernetes.claims import claim_projects, marked_instance_disk
from clusters.backends.kubernetes.client import KubeClient
from clusters.backends.kubernetes.labels import LABEL_ATTEMPT, LABEL_TASK
from clusters.backends.kubernetes.observation import container_status

INVENTORY_KINDS = ("nodes", "namespaces", "pvcs", "pods")
# Pod-level requirements of the backend, for check_cloud: (verb, API group, resource, subresource, what for).
REQUIRED_PERMISSIONS = [
    ("create", "batch", "jobs", "", "start tasks"),
    ("get", "batch", "jobs", "", "adopt a Job after a restart"),
    ("list", "batch", "jobs", "", "observe tasks"),
    ("watch", "batch", "jobs", "", "notice changes promptly"),
    ("delete", "batch", "jobs", "", "cancel tasks and clean up"),
    ("list", "", "pods", "", "observe tasks"),
    ("get", "", "pods", "log", "copy task logs"),
]
OPTIONAL_PERMISSIONS = [
    ("list", "", "persistentvolumeclaims", "", "list PVCs in the inventory"),
    ("list", "", "nodes", "", "list nodes in the inventory"),
    ("list", "", "namespaces", "", "list namespaces in the inventory"),
    ("list", "metrics.k8s.io", "pods", "", "show pod metrics"),
    ("list", "metrics.k8s.io", "nodes", "", "show node metrics"),
    ("create", "", "secrets", "", "deliver project secrets to tasks"),
    ("get", "", "secrets", "", "deliver project secrets to tasks"),
    ("patch", "", "secrets", "", "deliver project secrets to tasks"),
    ("delete", "", "secrets", "", "remove a task's secrets at cleanup"),
    ("create", "networking.k8s.io", "networkpolicies", "", "close a task's outbound network (egress)"),
    ("get", "networking.k8s.io", "networkpolicies", "", "close a task's outbound network (egress)"),
    ("patch", "networking.k8s.io", "networkpolicies", "", "close a task's outbound network (egress)"),
    ("delete", "networking.k8s.io", "networkpolicies", "", "remove a task's network policy at cleanup"),
]


def inventory(client: KubeClient, kind: str) -> list[dict[str, Any]]:
    core = client.core()
    if kind == "nodes":
        items = client.call("listing nodes", core.list_node).get("items") or []
        return [_node_summary(node) for node in items]
    if kind == "namespaces":
        items = client.call("listing namespaces", core.list_namespace).get("items") or []
        return [
            {
                "name": ns["metadata"]["name"],
                "phase": (ns.get("status") or {}).get("phase", ""),
                "created": ns["metadata"].get("creationTimestamp"),
                "labels": ns["metadata"].get("labels") or {},
            }
            for ns in items
        ]
    if kind == "pvcs":
        items = client.call(
            f"listing PersistentVolumeClaims in namespace {client.namespace}",
            core.list_namespaced_persistent_volume_claim,
            client.namespace,
        ).get("items")
        return [_pvc_summary(pvc) for pvc in items or []]
    if kind == "pods":
        items = client.pods(
            what=f"listing the pods of CloudPivot tasks in namespace {client.namespace}", label_selector=client.selector
        )
        return [_pod_summary(pod) for pod in items]
    raise BackendError(
        f"unknown resource kind '{kind}' for the {client.connection.cloud_id} cloud; "
        f"kinds: {', '.join(INVENTORY_KINDS)}",
        kind="not_found",
    )


def permissions(client: KubeClient) -> list[dict[str, Any]]:
    """Whether our credentials may do each thing we need: one access review per line of the tables above."""
    results = []
    for required, table in ((True, REQUIRED_PERMISSIONS), (False, OPTIONAL_PERMISSIONS)):
        for verb, group, resource, subresource, purpose in table:
            cluster_wide = resource in ("nodes", "namespaces")
            attributes = {"verb": verb, "group": group, "resource": resource}
            if subresource:
                attributes["subresource"] = subresource
            if not cluster_wide:
                attributes["namespace"] = client.namespace
            status = client.access_review(attributes, what=f"checking permission to {verb} {resource}")
            results.append(
                {
                    "verb": verb,
                    "group": group,
                    "resource": f"{resource}/{subresource}" if subresource else resource,
                    "namespace": "" if cluster_wide else client.namespace,
                    "purpose": purpose,
                    "required": required,
                    "allowed": bool(status.get("allowed")),
                    "reason": status.get("reason") or status.get("evaluationError") or "",
                }
            )
    return results


def _quantity(value: Any) -> str:
    return str(value) if value is not None else ""


def _node_summary(node: dict[str, Any]) -> dict[str, Any]:
    metadata, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    conditions = status.get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), {})
    labels = metadata.get("labels") or {}
    keys = ("cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage")
    return {
        "name": metadata["name"],
        "ready": str(ready.get("status")) == "True",
        "unschedulable": bool(spec.get("unschedulable")),
        "roles": sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")),
        "kubelet_version": (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
        "capacity": {
            k: _quantity((status.get("capacity") or {}).get(k)) for k in keys if k in (status.get("capacity") or {})
        },
        "allocatable": {
            k: _quantity((status.get("allocatable") or {}).get(k))
            for k in keys
            if k in (status.get("allocatable") or {})
        },
        "conditions": [
            {k: c.get(k, "") for k in ("type", "status", "reason", "message", "lastTransitionTime")} for c in conditions
        ],
        "taints": spec.get("taints") or [],
    }


def _pvc_summary(pvc: dict[str, Any]) -> dict[str, Any]:
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    return {
        "name": pvc["metadata"]["name"],
        "phase": status.get("phase", ""),
        "storage_class": spec.get("storageClassName") or "",
        "requested": ((spec.get("resources") or {}).get("requests") or {}).get("storage", ""),
        "capacity": (status.get("capacity") or {}).get("storage", ""),
        "access_modes": spec.get("accessModes") or [],
        "volume": spec.get("volumeName") or "",
        # Whose it is (claims.py): the projects its annotation names ("*": all), and whether it is a VM's disk.
        "projects": sorted(claim_projects(pvc)),
        "instance_disk": marked_instance_disk(pvc),
    }


def _pod_summary(pod: dict[str, Any]) -> dict[str, Any]:
    labels = pod["metadata"].get("labels") or {}
    status = pod.get("status") or {}
    container = container_status(pod)
    state = container.get("state") or {}
    detail = next(iter(state.values()), {}) if state else {}
    return {
        "name": pod["metadata"]["name"],
        "task": labels.get(LABEL_TASK, ""),
        "attempt": labels.get(LABEL_ATTEMPT, ""),
        "phase": status.get("phase", ""),
        "node": (pod.get("spec") or {}).get("nodeName") or "",
        "container_state": next(iter(state), ""),
        "reason": (detail or {}).get("reason") or status.get("reason") or "",
        "started": status.get("startTime"),
    }
