"""`manage.py check_cloud CLOUD_ID`: can CloudPivot reach this cloud, log in, and do what it needs there?"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from clusters.backends import get_backend
from clusters.backends.base import BackendError
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
        try:
            backend = get_backend(connection)
            requirements = backend.requirements()
            if requirements is not None:
                self._report_requirements(cloud_id, connection, requirements)
                return
            health = backend.health()
        except BackendError as exc:
            raise CommandError(f"{cloud_id}: {exc.message}") from None
        self.stdout.write(f"{cloud_id} ({connection.backend}): {'ok' if health.ok else 'NOT OK'}: {health.message}")
        if not health.ok:
            raise CommandError(f"{cloud_id}: cannot use this cloud: {health.message}")
        try:
            results = backend.permissions()
        except BackendError as exc:
            raise CommandError(f"{cloud_id}: could not check permissions: {exc.message}") from None
        if results is None:
            return
        missing = [r for r in results if r["required"] and not r["allowed"]]
        for r in results:
            where = f" in namespace {r['namespace']}" if r["namespace"] else " (cluster-wide)"
            group = f" ({r['group']})" if r["group"] else ""
            mark = "ok     " if r["allowed"] else ("MISSING" if r["required"] else "absent ")
            need = "needed" if r["required"] else "optional"
            self.stdout.write(f"  {mark} {r['verb']} {r['resource']}{group}{where}: {need} to {r['purpose']}")
        if missing:
            words = "; ".join(f"{r['verb']} {r['resource']}" for r in missing)
            raise CommandError(
                f"{cloud_id}: missing {len(missing)} permission(s) CloudPivot needs: {words}. "
                "Grant them with the Role in docs/backends/kubernetes.md."
            )
        self.stdout.write(self.style.SUCCESS(f"{cloud_id}: everything CloudPivot needs is allowed"))

    def _report_requirements(self, cloud_id: str, connection: CloudConnection, results: list[dict]) -> None:
        """OpenStack: each thing CloudPivot needs, checked and said in words."""
        self.stdout.write(f"{cloud_id} ({connection.backend}):")
        for r in results:
            mark = "ok     " if r["ok"] else ("MISSING" if r["required"] else "absent ")
            self.stdout.write(f"  {mark} {r['what']}: {r['detail']}")
        missing = [r for r in results if r["required"] and not r["ok"]]
        if missing:
            words = "; ".join(f"{r['what']} ({r['detail']})" for r in missing)
            raise CommandError(
                f"{cloud_id}: missing {len(missing)} thing(s) CloudPivot needs: {words}. "
                "See docs/backends/openstack.md."
            )
        self.stdout.write(self.style.SUCCESS(f"{cloud_id}: everything CloudPivot needs is there"))
