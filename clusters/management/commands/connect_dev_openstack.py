"""`manage.py connect_dev_openstack`: register the development OpenStack (deploy/dev/openstack) as a connection.

Everything comes from the development cloud's own files: deploy/dev/openstack/env.sh names the clouds.yaml,
its entry, the flavor and the image. The clouds.yaml is copied (0600) into the credentials directory, where
CloudPivot may read credentials. The connection is saved through the admin's own form (same checks, same
words), granted to the projects named, and tested; its health is stored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from cloudpivot import credentials
from cloudpivot.accounts.models import Project
from clusters.forms import CloudConnectionForm
from clusters.health import connections_check
from clusters.models import CloudConnection

ENV_SH = Path(settings.BASE_DIR) / "deploy" / "dev" / "openstack" / "env.sh"
WANTED = ("CP_OS_CLOUDS_YAML", "CP_OS_CLOUD", "CP_OS_FLAVOR", "CP_OS_IMAGE")


def dev_cloud_settings() -> dict[str, str]:
    """The development cloud's names, as its own env.sh sets them (CP_OS_STATE etc. may be overridden)."""
    script = f'. "{ENV_SH}" && printf "%s\\n" ' + " ".join(f'"${name}"' for name in WANTED)
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        raise CommandError(f"cannot read {ENV_SH}: {result.stderr.strip()}")
    return dict(zip(WANTED, result.stdout.splitlines(), strict=True))


class Command(BaseCommand):
    help = (
        "Register the development OpenStack (deploy/dev/openstack, started by its up.sh) as a cloud connection, "
        "grant it to projects and test it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--cloud-id", default="os-dev", help="the connection's id (default: os-dev)")
        parser.add_argument(
            "--project", action="append", default=[], help="grant it to this project (slug); may be repeated"
        )
        parser.add_argument("--no-test", action="store_true", help="save without asking the cloud")

    def handle(self, *args, cloud_id: str, project: list[str], no_test: bool, **options):
        names = dev_cloud_settings()
        source = Path(names["CP_OS_CLOUDS_YAML"])
        if not source.is_file():
            raise CommandError(
                f"{source} does not exist: start the development OpenStack first (bash deploy/dev/openstack/up.sh)"
            )
        target = self._copy_into_credentials(source)
        projects = list(Project.objects.filter(slug__in=project))
        unknown = set(project) - {p.slug for p in projects}
        if unknown:
            raise CommandError(f"no project {', '.join(sorted(unknown))}")
        existing = CloudConnection.objects.filter(cloud_id=cloud_id).first()
        granted = {p.pk for p in projects} | set(existing.projects.values_list("pk", flat=True) if existing else [])
        form = CloudConnectionForm(
            data={
                "cloud_id": cloud_id,
                "name": "Development OpenStack (deploy/dev/openstack)",
                "backend": "openstack",
                "dispatch_enabled": "on",
                "max_active_tasks": "0",
                "credentials_ref": str(target),
                "os_cloud": names["CP_OS_CLOUD"],
                "os_flavor": names["CP_OS_FLAVOR"],
                "os_image": names["CP_OS_IMAGE"],
                "os_networks": "none",
                "os_boot_deadline_seconds": "300",
                "options": "{}",
                "projects": sorted(granted),
                "check_cloud": "" if no_test else "on",
            },
            instance=existing,
        )
        if not form.is_valid():
            words = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
            raise CommandError(f"the connection was not saved: {words}")
        connection = form.save()
        verb = "updated" if existing else "registered"
        grants = ", ".join(connection.projects.order_by("slug").values_list("slug", flat=True)) or "no project yet"
        self.stdout.write(f"{verb} {cloud_id}: {names['CP_OS_CLOUD']} from {target}; granted to {grants}")
        if no_test:
            return
        report = connections_check([connection])[cloud_id]
        for check in report.checks:
            mark = "ok     " if check.ok else ("MISSING" if check.required else "absent ")
            self.stdout.write(f"  {mark} {check.what}: {check.detail}")
        if not report.ok:
            raise CommandError(f"{cloud_id}: {report.summary}")
        self.stdout.write(self.style.SUCCESS(f"{cloud_id}: health OK: {report.summary}"))

    def _copy_into_credentials(self, source: Path) -> Path:
        """The clouds.yaml where CloudPivot may read credentials (the credentials directory), owner-only."""
        directory = credentials.credentials_dir()
        directory.mkdir(parents=True, exist_ok=True)
        if source.resolve().is_relative_to(directory):
            return source.resolve()
        target = directory / "dev-openstack-clouds.yaml"
        shutil.copyfile(source, target)
        os.chmod(target, 0o600)
        return target
