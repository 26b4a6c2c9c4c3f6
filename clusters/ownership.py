"""Which project's data a cloud image is: the one rule instances and tasks share (docs/security.md).

Every CloudPivot project granted a connection shares its cloud tenant, so any project can see and name
another project's snapshot images. An image may be booted (as an instance, or as a task's VM) by a project
unless it is another project's snapshot: a snapshot row of another project has it, or it carries
CloudPivot's `cloudpivot_snapshot` mark that no live snapshot of this project owns (a snapshot whose row is
gone, or one from another installation).

Snapshots belong to the resources app, which sits above clusters; it hands its lookup in when Django
starts (`resources/apps.py` → `register_snapshot_lookup`), so this rule reads them without importing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cloudpivot.exceptions import PermissionDenied


@dataclass(frozen=True)
class SnapshotOwner:
    """One snapshot that has an image: whose it is, and whether it still counts (not deleted)."""

    snapshot_id: str
    name: str
    project_id: int
    project_slug: str
    live: bool


SnapshotLookup = Callable[[str], list[SnapshotOwner]]  # image id → the snapshots made as that image
_lookups: list[SnapshotLookup] = []


def register_snapshot_lookup(lookup: SnapshotLookup) -> None:
    """Called once by the app that keeps snapshots (resources), from its AppConfig.ready()."""
    if lookup not in _lookups:
        _lookups.append(lookup)


def snapshots_of_image(image_id: str) -> list[SnapshotOwner]:
    return [owner for lookup in _lookups for owner in lookup(image_id)]


def check_image_for_project(*, image_id: str, snapshot_mark: str, project_id: int, project_slug: str) -> None:
    """Raise PermissionDenied (field `image`) when the image is another project's snapshot.

    `snapshot_mark` is the image's `cloudpivot_snapshot` property as the cloud shows it ("" when none).
    """
    owners = snapshots_of_image(image_id)
    foreign = next((owner for owner in owners if owner.project_id != project_id), None)
    if foreign is not None:
        message = (
            f"snapshot {foreign.name} belongs to project {foreign.project_slug}; "
            f"it cannot be restored into project {project_slug}"
        )
        raise PermissionDenied(message, errors=[{"field": "image", "message": message}], code="restore_other_project")
    if not snapshot_mark:
        return
    owned = {owner.snapshot_id for owner in owners if owner.project_id == project_id and owner.live}
    if str(snapshot_mark) not in owned:
        message = (
            f"image {image_id} is a CloudPivot snapshot that no snapshot of project {project_slug} owns; "
            f"it cannot be restored into project {project_slug}"
        )
        raise PermissionDenied(message, errors=[{"field": "image", "message": message}], code="restore_other_project")
