"""Picks the instance backend of a connection; a cloud without one says so in words."""

from __future__ import annotations

import time

from clusters.models import CloudConnection
from resources.backends.base import BackendError, InstanceBackend, Unsupported

# Clusters seen serving kubevirt.io, by (cloud, endpoint): asked again after this many seconds.
_KUBEVIRT_SEEN: dict[tuple[str, str], float] = {}
KUBEVIRT_SEEN_SECONDS = 60.0


def get_instance_backend(connection: CloudConnection) -> InstanceBackend:
    if connection.backend == "openstack":
        from resources.backends.openstack import OpenStackInstances

        return OpenStackInstances(connection)
    if connection.backend == "kubernetes":
        from resources.backends.kubevirt import KubeVirtInstances

        backend = KubeVirtInstances(connection)
        _require_kubevirt(connection, backend)
        return backend
    raise Unsupported(f"VM instances are not available on the {connection.cloud_id} cloud ({connection.backend})")


def _require_kubevirt(connection: CloudConnection, backend) -> None:
    """Unsupported when the cluster answers that it does not serve kubevirt.io; silence concludes nothing."""
    key = (connection.cloud_id, connection.endpoint)
    if time.monotonic() - _KUBEVIRT_SEEN.get(key, -KUBEVIRT_SEEN_SECONDS) < KUBEVIRT_SEEN_SECONDS:
        return
    try:
        backend.require_served()
    except Unsupported:
        _KUBEVIRT_SEEN.pop(key, None)
        raise
    except BackendError:
        return  # unreachable or refused: the calls that follow report it in their own words
    _KUBEVIRT_SEEN[key] = time.monotonic()
