"""The admin's actions on orphan findings: delete the cloud resource, or adopt a server as an Instance.

Neither trusts the stored report. Each reads the resource from the cloud again and acts only if, at
that moment, it still carries this installation's tag, is still unknown to (or closed in) the database,
and is not protected. Every outcome — done, refused, failed — is audited; a failed delete marks the
finding `needs_cleanup` with the error.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from cloudpivot.accounts.audit import audit_system
from cloudpivot.accounts.models import Project, Role
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.exceptions import ApplicationError, Conflict, InvalidSpec
from clusters.backends.base import BackendError
from clusters.backends.openstack import META_INSTALLATION, installation_tag
from orphans.listers import tagged_lister
from orphans.listers.base import SERVER, CloudItem
from orphans.models import FindingCategory, FindingState, OrphanFinding
from orphans.report import Known, classify
from resources.choices import InstanceStatus
from resources.models import Instance
from resources.services.adoption import instance_adopt

ADOPTABLE_STATUSES = {"ACTIVE": InstanceStatus.RUNNING, "SHUTOFF": InstanceStatus.STOPPED}
PAUSED_STATUSES = {"PAUSED": InstanceStatus.PAUSED, "SUSPENDED": InstanceStatus.SUSPENDED}


class Refused(Conflict):
    code = "orphan_refused"


# ---------------------------------------------------------------------------- delete
def orphan_delete(*, finding: OrphanFinding, actor: AbstractBaseUser) -> str:
    """Delete the finding's cloud resource after re-checking tag, database and protection. Returns what happened."""
    try:
        lister, item = _fresh(finding)
        if item is None:
            _update(finding, state=FindingState.RESOLVED, resolved_at=timezone.now(), error="")
            _audit(actor, "resources:orphan-delete", finding, "ok", {"result": "already gone from the cloud"})
            return f"{finding.kind} {finding.name or finding.ref} was already gone"
        current = classify(item, Known.load(finding.connection, [item, *_images(lister, item)]))
        if current is None:
            raise Refused(f"{finding.kind} {item.name or item.ref} is now known to CloudPivot; it was left alone")
        if current.protected_reason:
            _update(finding, protected_reason=current.protected_reason)
            raise Refused(f"{finding.kind} {item.name or item.ref} is protected: {current.protected_reason}")
    except ApplicationError as exc:
        _audit(actor, "resources:orphan-delete", finding, "refused", {"reason": exc.message})
        raise
    try:
        lister.delete(item)
    except BackendError as exc:
        _update(finding, state=FindingState.NEEDS_CLEANUP, error=exc.message, acted_at=timezone.now())
        _audit(actor, "resources:orphan-delete", finding, "error", {"error": exc.message})
        raise ApplicationError(
            f"deleting {finding.kind} {item.name or item.ref} failed: {exc.message}", code="needs_cleanup"
        ) from None
    _update(finding, state=FindingState.DELETED, error="", acted_at=timezone.now())
    _audit(actor, "resources:orphan-delete", finding, "ok", {"name": item.name, "status": item.status})
    return f"asked the {finding.connection.cloud_id} cloud to delete {finding.kind} {item.name or item.ref}"


# ---------------------------------------------------------------------------- adopt
def orphan_adopt(
    *, finding: OrphanFinding, owner: AbstractBaseUser, project: Project, actor: AbstractBaseUser, name: str = ""
) -> Instance:
    """Make an orphan server an Instance of `project`, owned by `owner`, after the three checks:

    1. ours: the server, read now, carries this installation's tag (and installation metadata, if any) and
       is still unknown to the database — not an instance's, not a batch attempt's;
    2. state: Nova has settled it (no task in flight) in a status an instance can be in;
    3. owner: `owner` may act in `project` (submitter or admin), and `project` may use the connection.
    """
    try:
        item = _adoption_checks(finding=finding, owner=owner, project=project)
        instance = _adopt(finding=finding, item=item, owner=owner, project=project, name=name or item.name)
    except ApplicationError as exc:
        _update(finding, error=exc.message)
        _audit(actor, "resources:orphan-adopt", finding, "refused", {"reason": exc.message})
        raise
    _update(finding, state=FindingState.ADOPTED, error="", acted_at=timezone.now(), resolved_at=timezone.now())
    _audit(
        actor,
        "resources:orphan-adopt",
        finding,
        "ok",
        {"instance": str(instance.pk), "owner": owner.get_username(), "project": project.slug},
    )
    return instance


def _adoption_checks(*, finding: OrphanFinding, owner: AbstractBaseUser, project: Project) -> CloudItem:
    if finding.kind != SERVER or finding.category != FindingCategory.ORPHAN:
        raise Refused(f"only orphan servers can be adopted; this is a {finding.category} {finding.kind}")
    lister, item = _fresh(finding)
    if item is None:
        raise Refused(f"server {finding.name or finding.ref} is no longer in the cloud")
    # 1. ours, and still nobody's
    recorded = (item.evidence.get("metadata") or {}).get(META_INSTALLATION)
    if recorded not in (None, str(settings.INSTALLATION_ID)):
        raise Refused(f"server {item.name} records installation {recorded!r}, not this one: left alone")
    if installation_tag() not in (item.evidence.get("tags") or []) or not item.ours:
        raise Refused(f"server {item.name} does not carry this installation's tag ({installation_tag()}): left alone")
    if item.owner.get("attempt"):
        raise Refused(f"server {item.name} was made for batch attempt {item.owner['attempt']}; it is not adoptable")
    current = classify(item, Known.load(finding.connection, [item]))
    if current is None:
        raise Refused(f"server {item.name} now belongs to an instance of CloudPivot's")
    if current.category != FindingCategory.ORPHAN:
        raise Refused(f"server {item.name} is {current.category} now ({current.reason}); only orphans are adopted")
    # 2. state
    raw = item.status
    if item.evidence.get("task_state") or raw not in {**ADOPTABLE_STATUSES, **PAUSED_STATUSES}:
        task = item.evidence.get("task_state")
        raise Refused(
            f"server {item.name} is {raw}{f' ({task})' if task else ''}; adopt it once it is ACTIVE or SHUTOFF "
            "with no task in flight"
        )
    # 3. owner
    role = project_role(user=owner, project=project)
    if not role_at_least(role, Role.SUBMITTER):
        message = f"{owner.get_username()} is {role or 'not a member'} in project {project.slug}; owners need submitter"
        raise InvalidSpec(message, errors=[{"field": "owner", "message": message}])
    if not finding.connection.projects.filter(pk=project.pk).exists():
        message = f"project {project.slug} may not use the {finding.connection.cloud_id} cloud"
        raise InvalidSpec(message, errors=[{"field": "project", "message": message}])
    return item


def _adopt(*, finding: OrphanFinding, item: CloudItem, owner, project: Project, name: str) -> Instance:
    lister = tagged_lister(finding.connection)
    with transaction.atomic():
        instance = instance_adopt(
            connection=finding.connection,
            project=project,
            owner=owner,
            name=name,
            server_id=item.ref,
            status={**ADOPTABLE_STATUSES, **PAUSED_STATUSES}[item.status],
            flavor=item.evidence.get("flavor") or {},
            image=item.evidence.get("image") or "",
        )
        try:  # marked in the cloud as the instance's, as a create would; if this fails, no row stays
            lister.claim_server(item.ref, instance_id=str(instance.pk), name=instance.name)
        except BackendError as exc:
            raise ApplicationError(f"marking server {item.name} as adopted failed: {exc.message}") from None
    return instance


# ---------------------------------------------------------------------------- helpers
def _fresh(finding: OrphanFinding) -> tuple[Any, CloudItem | None]:
    """The finding's resource as the cloud has it now (None: gone); a resource not ours is refused here."""
    if finding.category == FindingCategory.MISSING:
        raise Refused(f"{finding.kind} {finding.name or finding.ref} is missing from the cloud: nothing to act on")
    lister = tagged_lister(finding.connection)
    if lister is None:
        raise Refused(f"the {finding.connection.cloud_id} cloud has no tagged resources")
    try:
        item = lister.read(finding.kind, finding.ref)
    except BackendError as exc:
        raise ApplicationError(
            f"reading {finding.kind} {finding.ref} failed: {exc.message}", code="cloud_unavailable"
        ) from None
    if item is not None and finding.uid and item.uid and item.uid != finding.uid:
        raise Refused(f"{finding.kind} {finding.ref} is now a different object (uid changed): left alone")
    if item is not None and not item.ours:
        raise Refused(f"{finding.kind} {item.name or item.ref} does not carry this installation's tag: left alone")
    return lister, item


def _images(lister: Any, item: CloudItem) -> list[CloudItem]:
    """For a server: the tagged images made from it (a snapshot's source is protected). One list call."""
    if item.kind != SERVER:
        return []
    return [i for i in lister.items() if i.owner.get("server") == item.ref]


def _update(finding: OrphanFinding, **values: Any) -> None:
    OrphanFinding.objects.filter(pk=finding.pk).update(**values)
    for key, value in values.items():
        setattr(finding, key, value)


def _audit(actor, action: str, finding: OrphanFinding, outcome: str, details: dict[str, Any]) -> None:
    audit_system(
        action=action,
        object_ref=f"{finding.connection.cloud_id}/{finding.kind}/{finding.ref}",
        details={"category": finding.category, "name": finding.name, **details},
        actor=actor,
        via="admin",
        outcome=outcome,
    )
