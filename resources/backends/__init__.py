"""Picks the instance backend of a connection; a cloud without one says so in words."""

from __future__ import annotations

from clusters.models import CloudConnection
from resources.backends.base import InstanceBackend, Unsupported


def get_instance_backend(connection: CloudConnection) -> InstanceBackend:
    if connection.backend == "openstack":
        from resources.backends.openstack import OpenStackInstances

        return OpenStackInstances(connection)
    raise Unsupported(f"VM instances are not available on the {connection.cloud_id} cloud ({connection.backend})")
