"""Deleting a cloud connection: its orphan findings are closed with it, and both are audited (admin)."""

from __future__ import annotations

from django.db import transaction

from cloudpivot.accounts.audit import audit_system
from clusters.models import CloudConnection


def connection_delete(*, connection: CloudConnection, actor) -> None:
    """Delete the connection; its open orphan findings go with it (listed in the audit entry, so what the
    cloud still held is not forgotten). Tasks, instances and snapshots still protect it (models.PROTECT)."""
    with transaction.atomic():
        findings = [
            {"kind": f.kind, "ref": f.ref, "name": f.name, "category": f.category, "state": f.state}
            for f in connection.orphan_findings.order_by("kind", "ref")
        ]
        cloud_id = connection.cloud_id
        connection.delete()
        audit_system(
            action="clusters:connection-delete",
            object_ref=cloud_id,
            details={"backend": connection.backend, "orphan_findings_closed": findings},
            actor=actor,
            via="admin",
        )
