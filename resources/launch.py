"""What the launch form offers: the clouds a user may launch on, and for one cloud and project the sizes
(each within the project's quota, or disabled with the reason) and the images (the cloud's and the
project's own snapshots).

Only reads. The rules come from where the create request is checked: the site limits and quotas of
resources.services.requests / resources.quotas, the grants of accounts.selectors; so what the form offers
is what the service would accept now (it checks again, under its locks, when the form is sent).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser

from cloudpivot.accounts.models import Project
from cloudpivot.accounts.selectors import projects_user_may_submit_to
from cloudpivot.exceptions import ApplicationError, cloud_error
from clusters.models import CloudConnection
from clusters.selectors import connections_visible_to
from resources import quotas, selectors
from resources.backends import get_instance_backend
from resources.backends.base import BackendError, FlavorView, Unsupported
from resources.choices import SnapshotStatus
from resources.models import Snapshot
from resources.services.requests import check_site_limits

SNAPSHOT_PREFIX = "snapshot:"  # an image choice naming one of the project's snapshots, not a cloud image
INSTANCE_BACKENDS = ("openstack", "kubernetes")


@dataclass
class SizeChoice:
    flavor: FlavorView
    refusal: str = ""  # why it cannot be launched now ("" when it can)


@dataclass
class LaunchChoices:
    connection: CloudConnection | None = None
    projects: list[Project] = field(default_factory=list)
    project: Project | None = None
    sizes: list[SizeChoice] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    snapshots: list[tuple[str, str]] = field(default_factory=list)
    free_image: bool = False  # any image reference is accepted (typed, not picked)
    problem: str = ""  # the cloud could not be read, in words


def launch_clouds(*, user: AbstractBaseUser, ask_clouds: bool = True) -> list[CloudConnection]:
    """Connections with VM instances on which one of the user's projects lets them submit. Without
    `ask_clouds` (the instance list's Launch button) no cluster is asked whether it serves KubeVirt."""
    rows = connections_visible_to(user=user).filter(backend__in=INSTANCE_BACKENDS).order_by("cloud_id")
    allowed = [c for c in rows if projects_user_may_submit_to(user=user, connection_id=c.pk).exists()]
    return [c for c in allowed if not ask_clouds or _serves_instances(c)]


def _serves_instances(connection: CloudConnection) -> bool:
    """False only where the cloud says it has none (a cluster without KubeVirt; asked once a minute).
    An unreachable cloud stays listed: choosing it shows why it cannot be read."""
    try:
        get_instance_backend(connection)
    except Unsupported:
        return False
    return True


def launch_choices(*, user: AbstractBaseUser, clouds: list[CloudConnection], cloud: str, project: str) -> LaunchChoices:
    """The choices for `cloud` (else the first cloud) and `project` (else the first project allowed there)."""
    connection = next((c for c in clouds if c.cloud_id == cloud), clouds[0] if clouds else None)
    if connection is None:
        return LaunchChoices()
    projects = list(projects_user_may_submit_to(user=user, connection_id=connection.pk).order_by("slug"))
    chosen = next((p for p in projects if p.slug == project), projects[0] if projects else None)
    choices = LaunchChoices(connection=connection, projects=projects, project=chosen)
    try:
        backend = get_instance_backend(connection)
        flavors, images = backend.flavors(), backend.images()
    except Unsupported as exc:
        choices.problem = exc.message
        return choices
    except BackendError as exc:
        choices.problem = cloud_error(exc, doing=f"asking the {connection.cloud_id} cloud").message
        return choices
    # CloudPivot snapshots are images too: the project's own are offered by name below, others' never
    snapshot_images = set(
        Snapshot.objects.filter(connection=connection).exclude(image_id="").values_list("image_id", flat=True)
    )
    choices.images = [(value, label) for value, label in images if value not in snapshot_images]
    choices.free_image = not images and connection.backend == "kubernetes"  # a container-disk reference
    if chosen is not None:
        flavors = sorted(flavors, key=lambda f: (f.vcpus, f.memory_mb, f.disk_gb, f.name))  # as flavor_fitting
        choices.sizes = [SizeChoice(flavor, _refusal(flavor, chosen, connection)) for flavor in flavors]
        snapshots = selectors.snapshots_visible_to(user=user).filter(
            project=chosen, connection=connection, status=SnapshotStatus.AVAILABLE
        )
        choices.snapshots = [(f"{SNAPSHOT_PREFIX}{s.pk}", _snapshot_label(s)) for s in snapshots]
    return choices


def _snapshot_label(snapshot: Snapshot) -> str:
    return f"{snapshot.name} (snapshot of {snapshot.instance.name if snapshot.instance else 'a deleted instance'})"


def _refusal(flavor: FlavorView, project: Project, connection: CloudConnection) -> str:
    """The site limit or the quota the size would break now, in the service's own words."""
    footprint = quotas.InstanceFootprint(
        instances=1, vcpus=flavor.vcpus, memory_mb=flavor.memory_mb, volume_gb=flavor.disk_gb
    )
    try:
        check_site_limits(flavor)
        quotas.check_instance_fits(project=project, connection_id=connection.pk, asked=footprint)
    except ApplicationError as exc:
        return exc.message
    return ""
