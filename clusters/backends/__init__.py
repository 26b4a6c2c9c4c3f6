"""Backend registry: the connection's backend kind chooses the adapter (and the module of its figures).

Each cloud lives in its own package (clusters/backends/kubernetes/, clusters/backends/openstack/), the
only place its SDK is imported; `local` is clusters/backends/local.py.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from clusters.backends.base import BackendError, CloudFigures, ExecutionBackend
from clusters.choices import BackendKind
from clusters.models import CloudConnection

BACKENDS: dict[str, str] = {
    BackendKind.LOCAL: "clusters.backends.local.LocalBackend",
    BackendKind.KUBERNETES: "clusters.backends.kubernetes.KubernetesBackend",
    BackendKind.OPENSTACK: "clusters.backends.openstack.OpenStackBackend",
}
# Figures a cloud reports about itself (node CPU/memory, its own quota use), for the metrics sampler.
# What a cloud does not serve is a note in the answer, not an error.
FIGURES: dict[str, str] = {
    BackendKind.LOCAL: "clusters.backends.local_metrics.cloud_figures",
    BackendKind.KUBERNETES: "clusters.backends.kubernetes.figures.cloud_figures",
    BackendKind.OPENSTACK: "clusters.backends.openstack.figures.cloud_figures",
}


def backend_uses_runner(kind: str) -> bool:
    """Whether a Runner reports this backend's executions (without building a client)."""
    return bool(import_string(BACKENDS[kind]).uses_runner) if kind in BACKENDS else False


def handed_out_kinds() -> tuple[str, ...]:
    """The kinds whose attempts the connection's host agent takes in a sync (ExecutionBackend.hands_out), where
    the others' are started in their cloud by the reconcile pass: said once, not as checks for `local`."""
    return tuple(kind for kind, path in BACKENDS.items() if import_string(path).hands_out)


def backend_hands_out(kind: str) -> bool:
    return kind in handed_out_kinds()


def get_backend(connection: CloudConnection) -> ExecutionBackend:
    path = BACKENDS.get(connection.backend)
    if path is None:
        raise BackendError(f"the {connection.backend} backend is not available in this version", kind="invalid_spec")
    return import_string(path)(connection)


def cloud_figures(connection: CloudConnection) -> CloudFigures:
    """The cloud's figures now; BackendError when it cannot be asked at all."""
    path = FIGURES.get(connection.backend)
    if path is None:
        raise BackendError(f"no figures for the {connection.backend} backend", kind="not_found")
    return import_string(path)(connection)
