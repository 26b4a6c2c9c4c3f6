"""Figures a cloud reports about itself (node CPU/memory, its own quota use), for the metrics sampler.

Each backend kind has a small module with one `cloud_figures(connection)` function, so the big backend
modules do not grow. What a cloud does not serve (no metrics-server, no admin rights for hypervisor
statistics) is a note, not an error: the sampler records what there is and says what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.module_loading import import_string

from clusters.backends.base import BackendError
from clusters.choices import BackendKind
from clusters.models import CloudConnection

# Node metric names shared by every backend (missing where the cloud does not say).
CPU_USED = "cpu_used_cores"
CPU_CAPACITY = "cpu_capacity_cores"
CPU_ALLOCATABLE = "cpu_allocatable_cores"
MEMORY_USED = "memory_used_bytes"
MEMORY_CAPACITY = "memory_capacity_bytes"
MEMORY_ALLOCATABLE = "memory_allocatable_bytes"


@dataclass
class CloudFigures:
    nodes: dict[str, dict[str, float]] = field(default_factory=dict)  # node name → metric → value
    instances: dict[str, dict[str, float]] = field(default_factory=dict)  # server/VM id → metric → value
    connection: dict[str, float] = field(default_factory=dict)  # connection-wide (the cloud's own quota use)
    notes: list[str] = field(default_factory=list)  # what the cloud does not serve: skipped, not an error


FIGURES: dict[str, str] = {
    BackendKind.LOCAL: "clusters.backends.local_metrics.cloud_figures",
    BackendKind.KUBERNETES: "clusters.backends.kubernetes_metrics.cloud_figures",
    BackendKind.OPENSTACK: "clusters.backends.openstack_metrics.cloud_figures",
}


def cloud_figures(connection: CloudConnection) -> CloudFigures:
    """The cloud's figures now; BackendError when it cannot be asked at all."""
    path = FIGURES.get(connection.backend)
    if path is None:
        raise BackendError(f"no figures for the {connection.backend} backend", kind="not_found")
    return import_string(path)(connection)
