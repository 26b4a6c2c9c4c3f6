"""A Kubernetes cluster's own limits on one task ("Will it fit?", clusters/fit.py).

Three reads, each optional (a 403 or an unreadable answer is a note): the namespace's ResourceQuotas
(hard against used: full now, or smaller than the task), its LimitRanges (a container's or pod's max) and
the nodes' allocatable (the largest schedulable node that matches the task's node selector, GPUs as
nvidia.com/gpu). The task's pod asks requests = limits (manifest.py), so one amount counts for both.
Free room on nodes (allocatable less what pods request) is not read: a task that fits a node but not its
free room waits in the cluster as a Pending pod, which CloudPivot already reports.
"""

from __future__ import annotations

from typing import Any

from clusters.backends.base import BackendError, FitLimit
from clusters.backends.kubernetes.client import KubeClient
from clusters.backends.kubernetes.figures import quantity

GPU = "nvidia.com/gpu"
MIB = 1024 * 1024
# A ResourceQuota's `hard` key → what of the task it counts.
QUOTA_KEYS = {
    "cpu": "cpu",
    "requests.cpu": "cpu",
    "limits.cpu": "cpu",
    "memory": "memory_mb",
    "requests.memory": "memory_mb",
    "limits.memory": "memory_mb",
    f"requests.{GPU}": "gpu",
    f"limits.{GPU}": "gpu",
    "pods": "pods",
    "count/pods": "pods",
    "count/jobs.batch": "jobs",
}
# A node's or LimitRange's resource name → the task's.
RESOURCE_KEYS = {"cpu": "cpu", "memory": "memory_mb", GPU: "gpu"}


def amount(resource: str, text: Any) -> float | None:
    """A quantity in the task's units: cores, MB (MiB, as manifest.py asks `Mi`), counts."""
    value = quantity(str(text)) if text is not None else None
    if value is None:
        return None
    return value / MIB if resource == "memory_mb" else value


def fit_limits(client: KubeClient, asked: dict[str, Any], *, node_selector: dict[str, str]) -> tuple[list, list]:
    wanted = {key: float(asked.get(key) or 0) for key in ("cpu", "memory_mb", "gpu")}
    wanted |= {"pods": 1.0, "jobs": float(asked.get("jobs", 1))}  # a VM instance makes a pod but no Job
    limits: list[FitLimit] = []
    notes: list[str] = []
    for reader in (_quota_limits, _limit_range_limits):
        try:
            limits += reader(client, wanted)
        except BackendError as exc:
            notes.append(exc.message)
    try:
        limits += _node_limits(client, wanted, node_selector)
    except BackendError as exc:
        notes.append(exc.message)
    return limits, notes


def _quota_limits(client: KubeClient, wanted: dict[str, float]) -> list[FitLimit]:
    ns = client.namespace
    answer = client.call(f"listing ResourceQuotas in namespace {ns}", client.core().list_namespaced_resource_quota, ns)
    limits = []
    for quota in answer.get("items") or []:
        status = quota.get("status") or {}
        hard = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}
        used = status.get("used") or {}
        for key, text in hard.items():
            resource = QUOTA_KEYS.get(key)
            if resource is None or not wanted.get(resource):
                continue
            most = amount(resource, text)
            if most is None:
                continue
            in_use = amount(resource, used.get(key, "0")) or 0.0
            source = f"ResourceQuota {ns}/{quota['metadata']['name']}"
            limits.append(FitLimit(resource, wanted[resource], max(most - in_use, 0.0), most, source))
    return limits


def _limit_range_limits(client: KubeClient, wanted: dict[str, float]) -> list[FitLimit]:
    ns = client.namespace
    answer = client.call(f"listing LimitRanges in namespace {ns}", client.core().list_namespaced_limit_range, ns)
    limits = []
    for limit_range in answer.get("items") or []:
        for entry in (limit_range.get("spec") or {}).get("limits") or []:
            if entry.get("type") not in ("Container", "Pod"):
                continue
            for key, text in (entry.get("max") or {}).items():
                resource = RESOURCE_KEYS.get(key)
                most = amount(resource, text) if resource else None
                if resource and most is not None and wanted.get(resource):
                    source = f"LimitRange {ns}/{limit_range['metadata']['name']} ({entry['type']} max)"
                    limits.append(FitLimit(resource, wanted[resource], None, most, source))
    return limits


def _node_limits(client: KubeClient, wanted: dict[str, float], node_selector: dict[str, str]) -> list[FitLimit]:
    """The largest allocatable of each resource over the nodes a task could land on; GPUs only when asked."""
    answer = client.call("listing nodes", client.core().list_node)
    nodes = [node for node in answer.get("items") or [] if _schedulable(node, node_selector)]
    if not nodes:
        return []
    source = "node allocatable, largest node" + (" matching the node selector" if node_selector else "")
    limits = []
    for key, resource in RESOURCE_KEYS.items():
        if not wanted.get(resource):
            continue
        sizes = [amount(resource, _allocatable(node).get(key, "0")) or 0.0 for node in nodes]
        largest = max(sizes)
        limits.append(FitLimit(resource, wanted[resource], None, largest, source))
    return limits


def _allocatable(node: dict[str, Any]) -> dict[str, Any]:
    return (node.get("status") or {}).get("allocatable") or {}


def _schedulable(node: dict[str, Any], node_selector: dict[str, str]) -> bool:
    labels = node["metadata"].get("labels") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is not None and str(ready.get("status")) != "True":
        return False
    return all(labels.get(key) == value for key, value in node_selector.items())
