"""Figures of a Kubernetes cloud: node capacity/allocatable (core API) and use (metrics.k8s.io/v1beta1).

Reads through the backend's public inventory and metrics calls, so timeouts and error words are its own.
"""

from __future__ import annotations

from decimal import InvalidOperation

from kubernetes.utils import parse_quantity

from clusters.backends.base import BackendError
from clusters.backends.figures import (
    CPU_ALLOCATABLE,
    CPU_CAPACITY,
    CPU_USED,
    MEMORY_ALLOCATABLE,
    MEMORY_CAPACITY,
    MEMORY_USED,
    CloudFigures,
)
from clusters.backends.kubernetes import KubernetesBackend
from clusters.models import CloudConnection


def quantity(text: str) -> float | None:
    """ "1200m" → 1.2, "3Gi" → 3221225472.0; None for an empty or malformed quantity."""
    if not text:
        return None
    try:
        return float(parse_quantity(text))
    except (ValueError, InvalidOperation, TypeError):
        return None


def cloud_figures(connection: CloudConnection) -> CloudFigures:
    backend = KubernetesBackend(connection)
    figures = CloudFigures()
    for node in backend.inventory("nodes"):
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
        usage = backend.metrics()
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
