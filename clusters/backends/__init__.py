"""Backend registry: the connection's backend kind chooses the adapter."""

from __future__ import annotations

from django.utils.module_loading import import_string

from clusters.backends.base import ExecutionBackend
from clusters.choices import BackendKind
from clusters.models import CloudConnection

BACKENDS: dict[str, str] = {
    BackendKind.LOCAL: "clusters.backends.local.LocalBackend",
    BackendKind.KUBERNETES: "clusters.backends.kubernetes.KubernetesBackend",
    BackendKind.OPENSTACK: "clusters.backends.openstack.OpenStackBackend",
}


def backend_uses_runner(kind: str) -> bool:
    """Whether a Runner reports this backend's executions (without building a client)."""
    return bool(getattr(import_string(BACKENDS[kind]), "uses_runner", False)) if kind in BACKENDS else False


def get_backend(connection: CloudConnection) -> ExecutionBackend:
    path = BACKENDS.get(connection.backend)
    if path is None:
        from clusters.backends.base import BackendError

        raise BackendError(f"the {connection.backend} backend is not available in this version", kind="invalid_spec")
    return import_string(path)(connection)
