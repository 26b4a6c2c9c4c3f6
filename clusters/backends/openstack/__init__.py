"""OpenStack: the one package that imports `openstack` (openstacksdk) and keystoneauth1.

Cut by job: `client` (credentials, the cached SDK Connection, errors in words, CloudPivot's marks),
`backend` (the task backend: one Nova server per attempt), `cloudinit` (the Runner's user data),
`observation` (a server → an Observation), `inventory` (flavors, images, networks, volumes, servers,
quota use), `checks` (what check_cloud and health verify), `figures` (hypervisor and diagnostics).

Nova instances (resources/backends/openstack.py) and the orphan listers (orphans/listers/) use
`OpenStackClient` — `conn()` for the SDK proxies, `call()` for every call — so they never build a task
backend to borrow its connection. Connection settings: docs/backends/openstack.md.
"""

from __future__ import annotations

from clusters.backends.openstack.backend import OpenStackBackend, runner_never_reported
from clusters.backends.openstack.client import (
    BLOCK_STORAGE_TYPES,
    DEFAULT_OPTIONS,
    META_ATTEMPT,
    META_INSTALLATION,
    META_TASK,
    OpenStackClient,
    installation_tag,
)

__all__ = [
    "BLOCK_STORAGE_TYPES",
    "DEFAULT_OPTIONS",
    "META_ATTEMPT",
    "META_INSTALLATION",
    "META_TASK",
    "OpenStackBackend",
    "OpenStackClient",
    "installation_tag",
    "runner_never_reported",
]
