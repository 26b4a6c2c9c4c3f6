"""What other apps ask of cloud connections that writes: the one place outside the admin that makes one."""

from __future__ import annotations

from cloudpivot.accounts.models import Project
from clusters.choices import BackendKind
from clusters.models import CloudConnection


def local_connection_ensure(*, project: Project) -> CloudConnection:
    """The `local` connection (this host), made if missing and granted to `project`: the embedded default's
    cloud. Made by CloudPivot itself, not by an admin, so it dispatches at once."""
    local, _ = CloudConnection.objects.get_or_create(
        cloud_id="local", defaults={"name": "This host", "backend": BackendKind.LOCAL}
    )
    local.projects.add(project)
    return local
