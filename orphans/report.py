"""The orphan report: what CloudPivot tagged in each cloud, compared with what its database expects.

Categories (DESIGN §7, the seed's orphan rules):

- orphan: tagged by this installation, unknown to the database (e.g. a server whose create outlived its row);
- stale: the database row says deleted/closed (an instance deleted, an attempt closed with its cleanup
  done, a snapshot deleted) but the cloud still has the resource;
- missing: the database expects it (a live instance's server, an available snapshot's image) and the
  cloud has no such thing. For instances the refresh schedule already marks them Unknown.

Only resources carrying this installation's tag or label are ever listed; a protected one (the cloud's
own marks, or still referenced by a snapshot or an instance) is listed with the reason and never deleted.
The cloud is listed *before* the database is read, so a row committed before its cloud create (instances,
attempts and snapshots all are) is always seen: an in-flight create is never reported as an orphan.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from clusters.models import CloudConnection
from orphans.listers import tagged_lister
from orphans.listers.base import DATA_VOLUME, IMAGE, JOB, SERVER, VM, VM_SNAPSHOT, VOLUME, CloudItem, TaggedLister
from resources.choices import InstanceStatus, SnapshotStatus
from resources.models import Instance, KeptVolume, Snapshot
from tasks.choices import CleanupState
from tasks.models import Attempt

ORPHAN, STALE, MISSING = "orphan", "stale", "missing"


@dataclass(frozen=True)
class Finding:
    kind: str
    ref: str
    name: str
    category: str
    reason: str
    protected_reason: str = ""
    uid: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    connection: CloudConnection
    findings: list[Finding]
    notes: list[str]


def connection_report(connection: CloudConnection, lister: TaggedLister | None = None) -> Report:
    """One connection's findings. Raises BackendError when the cloud does not answer (nothing is concluded)."""
    lister = lister or tagged_lister(connection)
    if lister is None:
        return Report(connection, [], [f"{connection.backend} connections hold no tagged cloud resources"])
    items = lister.items()  # the cloud first, the database second (see the module docstring)
    known = Known.load(connection, items)
    findings = [f for f in (classify(item, known) for item in items) if f is not None]
    findings += missing(connection, items, lister)
    return Report(connection, findings, list(lister.notes))


def classify(item: CloudItem, known: Known) -> Finding | None:
    """None when the database accounts for the item; else the finding, with any protection found."""
    if not item.ours:
        return None  # never listed, never touched: not ours
    verdict = RULES[item.kind](item, known)
    if verdict is None:
        return None
    category, reason = verdict
    protection = "; ".join(filter(None, [item.protected_reason, known.references(item)]))
    return Finding(
        kind=item.kind,
        ref=item.ref,
        name=item.name,
        category=category,
        reason=reason,
        protected_reason=protection,
        uid=item.uid,
        evidence={"status": item.status, "owner_marks": item.owner, **item.evidence},
    )


@dataclass
class Known:
    """The database rows the cloud items could belong to (read in a few queries per connection)."""

    connection: CloudConnection
    instances_by_server: dict[str, Instance]
    instances_by_id: dict[str, Instance]
    instances_by_volume: dict[str, Instance]
    snapshots_by_image: dict[str, Snapshot]
    snapshots_by_id: dict[str, Snapshot]
    attempts: dict[str, Attempt]
    images_by_source: dict[str, list[CloudItem]]
    kept_volumes: set[str] = field(default_factory=set)  # refs of kept volumes not reclaimed yet

    @classmethod
    def load(cls, connection: CloudConnection, items: list[CloudItem]) -> Known:
        refs = [i.ref for i in items]
        instance_ids = _uuids(i.owner.get("instance") for i in items)
        snapshot_ids = _uuids(i.owner.get("snapshot") for i in items)
        attempt_names = {i.owner["attempt"] for i in items if i.owner.get("attempt")}
        # Every connection of the same kind may own what this cloud holds: two connections can reach one
        # project (each with its own defaults), so a live server of the other one is not an orphan. Server,
        # volume, image and instance ids are UUIDs and attempt names unique per installation, so a row of a
        # connection to another cloud never matches.
        owners = CloudConnection.objects.filter(backend=connection.backend)
        instances = list(
            Instance.objects.filter(connection__in=owners, server_id__in=refs)
            | Instance.objects.filter(connection__in=owners, pk__in=instance_ids)
            | Instance.objects.filter(connection__in=owners, root_volume_ref__in=refs)
        )
        snapshots = list(
            Snapshot.objects.filter(connection__in=owners, image_id__in=refs)
            | Snapshot.objects.filter(connection__in=owners, pk__in=snapshot_ids)
        )
        images_by_source: dict[str, list[CloudItem]] = {}
        for item in items:
            if item.kind == IMAGE and item.owner.get("server"):
                images_by_source.setdefault(item.owner["server"], []).append(item)
        return cls(
            connection=connection,
            instances_by_server={i.server_id: i for i in instances if i.server_id},
            instances_by_id={str(i.pk): i for i in instances},
            instances_by_volume={i.root_volume_ref: i for i in instances if i.root_volume_ref},
            snapshots_by_image={s.image_id: s for s in snapshots if s.image_id},
            snapshots_by_id={str(s.pk): s for s in snapshots},
            attempts={
                a.external_name: a
                for a in Attempt.objects.filter(
                    external_name__in=attempt_names, task__connection__in=owners
                ).select_related("task__connection")
            },
            images_by_source=images_by_source,
            kept_volumes=set(
                KeptVolume.objects.filter(connection__in=owners, reclaimed_at__isnull=True).values_list(
                    "ref", flat=True
                )
            ),
        )

    def references(self, item: CloudItem) -> str:
        """Why deleting the item would break something the portal keeps ("" when nothing refers to it)."""
        if item.kind in (SERVER, VM):
            sources = self.images_by_source.get(item.ref, [])
            live = Snapshot.objects.filter(instance__server_id=item.ref).exclude(status=SnapshotStatus.DELETED)
            names = [f"image {i.name or i.ref}" for i in sources] + [f"snapshot {s.name}" for s in live]
            return f"the source of {', '.join(names)}" if names else ""
        if item.kind == IMAGE:
            users = Instance.objects.filter(image=item.ref).exclude(status=InstanceStatus.DELETED)
            names = [str(i) for i in users[:5]]
            return f"the boot image of instance {', '.join(names)}" if names else ""
        return ""

    def keeps_finished(self, attempt: Attempt) -> bool:
        """The attempt's connection keeps finished attempts' resources on purpose (retention=keep,
        keep_finished_jobs)."""
        options = attempt.task.connection.options or {}
        return options.get("retention") == "keep" or bool(options.get("keep_finished_jobs"))


def _server(item: CloudItem, known: Known) -> tuple[str, str] | None:
    instance = known.instances_by_server.get(item.ref) or known.instances_by_id.get(item.owner.get("instance", ""))
    if instance is not None:
        if instance.status != InstanceStatus.DELETED:
            return None
        when = f" at {instance.deleted_at:%Y-%m-%d %H:%M} UTC" if instance.deleted_at else ""
        return STALE, f"instance {instance} was deleted{when}, yet its server is still in the cloud"
    if item.owner.get("attempt"):
        return _attempt_rule(item, known, "server")
    if item.owner.get("instance"):
        return ORPHAN, f"tagged for instance {item.owner['instance']}, which CloudPivot has no record of"
    return ORPHAN, "tagged by this installation, but no instance or attempt of CloudPivot's refers to it"


def _image(item: CloudItem, known: Known) -> tuple[str, str] | None:
    snapshot = known.snapshots_by_image.get(item.ref) or known.snapshots_by_id.get(item.owner.get("snapshot", ""))
    if snapshot is None:
        return ORPHAN, "a snapshot image of this installation that no snapshot of CloudPivot's refers to"
    if snapshot.status in (SnapshotStatus.DELETED, SnapshotStatus.FAILED):
        return STALE, f"snapshot {snapshot} is {snapshot.status}, yet its image is still in the cloud"
    return None


def _volume(item: CloudItem, known: Known) -> tuple[str, str] | None:
    if item.ref in known.instances_by_volume:
        return None  # a root volume is kept on an instance's delete unless a purge is asked
    if item.ref in known.kept_volumes:
        return None  # kept by a delete: listed with its project's kept volumes, reclaimed by its members
    return ORPHAN, "a volume of this installation that no instance of CloudPivot's refers to"


def _job(item: CloudItem, known: Known) -> tuple[str, str] | None:
    if not item.owner.get("attempt"):
        return ORPHAN, "labelled by this installation, but with no attempt label"
    return _attempt_rule(item, known, "Job")


def _data_volume(item: CloudItem, known: Known) -> tuple[str, str] | None:
    """A KubeVirt root disk: its instance's while that lives; kept by a delete once the instance is gone."""
    instance = known.instances_by_id.get(item.owner.get("instance", ""))
    if instance is None:
        return ORPHAN, "a DataVolume of this installation that no instance of CloudPivot's refers to"
    if instance.status != InstanceStatus.DELETED:
        return None
    if f"datavolume/{item.ref}" in known.kept_volumes:
        return None  # a kept volume of its project: listed there, reclaimed by its members (resources.services.reclaim)
    return STALE, f"instance {instance} was deleted keeping its disk; the DataVolume is still in the cloud"


RULES = {
    SERVER: _server,
    VM: _server,
    IMAGE: _image,
    VM_SNAPSHOT: _image,
    VOLUME: _volume,
    DATA_VOLUME: _data_volume,
    JOB: _job,
}


def _attempt_rule(item: CloudItem, known: Known, what: str) -> tuple[str, str] | None:
    """An open attempt (or one whose cleanup is still pending) owns its resource; a cleaned-up one does not."""
    name = item.owner["attempt"]
    attempt = known.attempts.get(name)
    if attempt is None:
        return ORPHAN, f"made for attempt {name}, which CloudPivot has no record of"
    if not attempt.is_closed or attempt.cleanup_state != CleanupState.DONE:
        return None
    if known.keeps_finished(attempt):
        return None  # kept by the connection's retention setting, not forgotten
    return STALE, (
        f"attempt {name} closed at {attempt.closed_at:%Y-%m-%d %H:%M} UTC and its cleanup is done, "
        f"yet its {what} is still in the cloud"
    )


def missing(connection: CloudConnection, items: list[CloudItem], lister: TaggedLister) -> list[Finding]:
    """Rows whose resource the listing lacks, each confirmed by a read by id (an untagged copy still counts)."""
    listed = {(i.kind, i.ref) for i in items}
    expected: list[tuple[str, str, str, str]] = []
    instances = Instance.objects.filter(connection=connection).exclude(status=InstanceStatus.DELETED)
    for instance in instances.exclude(server_id=""):
        row = f"instance {instance} ({instance.status})"
        expected.append((lister.instance_kind, instance.server_id, instance.name, row))
    for snapshot in Snapshot.objects.filter(connection=connection, status=SnapshotStatus.AVAILABLE).exclude(
        image_id=""
    ):
        expected.append((lister.snapshot_kind, snapshot.image_id, snapshot.name, f"snapshot {snapshot} (available)"))
    findings = []
    for kind, ref, name, row in expected:
        if (kind, ref) in listed or lister.read(kind, ref) is not None:
            continue
        findings.append(Finding(kind=kind, ref=ref, name=name, category=MISSING, reason=f"{row} expects it"))
    return findings


def _uuids(values) -> list[str]:
    found = []
    for value in values:
        try:
            found.append(str(uuid.UUID(str(value))))
        except ValueError:
            continue
    return found
