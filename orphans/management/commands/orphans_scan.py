"""`manage.py orphans_scan [CLOUD_ID ...]`: compute and store the orphan report now (the schedule: every 10 min)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from clusters.models import CloudConnection
from orphans.models import OrphanFinding
from orphans.scan import orphans_scan


class Command(BaseCommand):
    help = (
        "Compare what CloudPivot tagged in each cloud (servers, snapshot images, volumes, Jobs, KubeVirt VMs, "
        "VM snapshots, DataVolumes) with its database and store the findings (admin: Orphans › Orphan findings). "
        "Never deletes anything."
    )

    def add_arguments(self, parser):
        parser.add_argument("cloud_ids", nargs="*", help="connections to scan (default: all)")

    def handle(self, *args, cloud_ids: list[str], **options):
        connections = None
        if cloud_ids:
            connections = list(CloudConnection.objects.filter(cloud_id__in=cloud_ids))
            unknown = sorted(set(cloud_ids) - {c.cloud_id for c in connections})
            if unknown:
                raise CommandError(f"no cloud connection {', '.join(unknown)}")
        self.stdout.write(orphans_scan(connections=connections))
        for finding in OrphanFinding.objects.filter(state__in=["open", "needs_cleanup"]).select_related("connection"):
            protected = f" [protected: {finding.protected_reason}]" if finding.protected_reason else ""
            self.stdout.write(
                f"{finding.connection.cloud_id} {finding.category} {finding.kind} {finding.name or '-'} {finding.ref}"
                f" ({finding.state}): {finding.reason}{protected}"
            )
