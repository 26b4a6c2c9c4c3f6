"""`manage.py check_cloud CLOUD_ID`: can CloudPivot reach this cloud, log in, and do what it needs there?

The checks themselves are clusters.health's (the same ones the scheduled health check runs); this command
prints each one and stores the verdict as the connection's health.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from clusters.health import connection_checks, connection_health_record
from clusters.models import CloudConnection


class Command(BaseCommand):
    help = (
        "Check a cloud connection: reachability, credentials and what CloudPivot needs there (Kubernetes: "
        "permissions; OpenStack: Keystone login, compute/image/network services, the default flavor, image, "
        "networks and key pair). "
        "Exits non-zero when something is missing."
    )

    def add_arguments(self, parser):
        parser.add_argument("cloud_id", help="the connection's cloud_id, e.g. k3s-lab")

    def handle(self, *args, cloud_id: str, **options):
        connection = CloudConnection.objects.filter(cloud_id=cloud_id).first()
        if connection is None:
            known = ", ".join(CloudConnection.objects.values_list("cloud_id", flat=True)) or "none"
            raise CommandError(f"no cloud connection '{cloud_id}' (known: {known})")
        report = connection_health_record(connection=connection, report=connection_checks(connection))
        verdict = "ok" if report.ok else "NOT OK"
        self.stdout.write(f"{cloud_id} ({connection.backend}): {verdict}: {report.summary}")
        for check in report.checks:
            mark = "ok     " if check.ok else ("MISSING" if check.required else "absent ")
            self.stdout.write(f"  {mark} {check.what}: {check.detail}")
        if not report.ok:
            raise CommandError(f"{cloud_id}: {report.summary}" + (f". {report.hint}" if report.hint else ""))
        self.stdout.write(self.style.SUCCESS(f"{cloud_id}: {report.summary}"))
