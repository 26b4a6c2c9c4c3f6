"""Figures of a Kubernetes cloud: node capacity/allocatable (core API) and use (metrics.k8s.io/v1beta1).

`metrics()` is the inventory API's current view; `cloud_figures()` turns it into the sampler's numbers.
No metrics-server is a note, not an error: capacity is still recorded.
"""

from __future__ import annotations

from decimal import InvalidOperation
from typing import Any

from cloudpivot.lazy_module import LazyModule
from clusters.backends.base import (
    CPU_ALLOCATABLE,
    CPU_CAPACITY,
    CPU_USED,
    MEMORY_ALLOCATABLE,
    MEMORY_CAPACITY,
    MEMORY_USED,
    BackendError,
    CloudFigures,
)
from clusters.backends.kubernetes.client import KubeApiError, KubeClient
from clusters.backends.kubernetes.inventory import inventory
from clusters.backends.kubernetes.labels import CONTAINER, LABEL_ATTEMPT
from clusters.models import CloudConnection

k8s_utils = LazyModule("kubernetes.utils")  # imported at the first figure read (cloudpivot/lazy_module.py)


def metrics(client: KubeClient) -> dict[str, Any]:
    """CPU and memory in use from metrics.k8s.io (metrics-server): nodes and the pods of our tasks."""
    custom = client.custom()
    out: dict[str, Any] = {"nodes": [], "pods": [], "errors": []}
    try:
        pods = client.call(
            "reading pod metrics",
            custom.list_namespaced_custom_object,
            "metrics.k8s.io",
            "v1beta1",
            client.namespace,
            "pods",
            label_selector=client.selector,
        )
    except KubeApiError as exc:
        if exc.status in (404, 503):
            raise BackendError(
                f"metrics API not available on this cluster ({client.connection.cloud_id}): the metrics.k8s.io "
                "API is not served; install metrics-server to see CPU and memory use",
                kind="not_found",
            ) from None
        raise
    out["pods"] = [_pod_metrics(item) for item in pods.get("items") or []]
    try:
        nodes = client.call(
            "reading node metrics", custom.list_cluster_custom_object, "metrics.k8s.io", "v1beta1", "nodes"
        )
        out["nodes"] = [_node_metrics(item) for item in nodes.get("items") or []]
    except BackendError as exc:
        out["errors"].append(exc.message)
    return out


def quantity(text: str) -> float | None:
    """ "1200m" → 1.2, "3Gi" → 3221225472.0; None for an empty or malformed quantity."""
    if not text:
        return None
    try:
        return float(k8s_utils.parse_quantity(text))
    except (ValueError, InvalidOperation, TypeError):
        return None


def cloud_figures(connection: CloudConnection) -> CloudFigures:
    client = KubeClient(connection)
    figures = CloudFigures()
    for node in inventory(client, "nodes"):
        values = {}
        for metric, table, key in (
            (CPU_CAPACITY, "capacity", "cpu"),
            (CPU_ALLOCATABLE, "allocatable", "cpu"),
            (MEMORY_CAPACITY, "capacity", "memory"),
            (MEMORY_ALLOCATABLE, "allocatable", "memory"),
            ("pods_allocatable", "allocatable", "pods"),
        ):
            value = quantity(node[table].get(key, ""))
            if value is not None:
                values[metric] = value
        figures.nodes[node["name"]] = values
    try:
        usage = metrics(client)
    except BackendError as exc:
        if exc.kind != "not_found":
            raise
        figures.notes.append(exc.message)  # no metrics-server: capacity only
        return figures
    figures.notes.extend(usage.get("errors") or [])
    for item in usage.get("nodes") or []:
        values = figures.nodes.setdefault(item["name"], {})
        for metric, key in ((CPU_USED, "cpu"), (MEMORY_USED, "memory")):
            value = quantity(item.get(key, ""))
            if value is not None:
                values[metric] = value
    return figures


def _pod_metrics(item: dict[str, Any]) -> dict[str, Any]:
    containers = item.get("containers") or []
    usage = next((c.get("usage") or {} for c in containers if c.get("name") == CONTAINER), {})
    labels = item["metadata"].get("labels") or {}
    return {
        "name": item["metadata"]["name"],
        "attempt": labels.get(LABEL_ATTEMPT, ""),
        "cpu": usage.get("cpu", ""),
        "memory": usage.get("memory", ""),
        "window": item.get("window", ""),
        "timestamp": item.get("timestamp", ""),
    }


def _node_metrics(item: dict[str, Any]) -> dict[str, Any]:
    usage = item.get("usage") or {}
    return {
        "name": item["metadata"]["name"],
        "cpu": usage.get("cpu", ""),
        "memory": usage.get("memory", ""),
        "window": item.get("window", ""),
        "timestamp": item.get("timestamp", ""),
    }
