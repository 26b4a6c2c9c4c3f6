"""Asking for instance actions: each request becomes an Operation, checked, admitted and enqueued.

Nothing here changes a cloud. The checks that can refuse (permissions, the state table, quotas,
what the backend cannot do) all run before the Operation exists; the job (services.run) does the work.
Quotas are checked under the connection and project row locks, like task admission, so parallel
creates cannot both take the last free slot.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from cloudpivot.accounts.models import Project
from cloudpivot.accounts.selectors import project_for_submission
from cloudpivot.accounts.ssh_keys import keys_for_instance
from cloudpivot.exceptions import (
    ApplicationError,
    Conflict,
    InvalidSpec,
    InvalidState,
    PermissionDenied,
    UnsupportedAction,
    cloud_error,
)
from cloudpivot.idempotency import canonical_sha256, replay_for_key
from clusters.models import CloudConnection
from clusters.ownership import check_image_for_project
from clusters.selectors import connection_for_user, connection_granted, grant_withdrawn_words
from resources import dispatch, quotas
from resources.access import login_user
from resources.backends import get_instance_backend
from resources.backends.base import BackendError, Unsupported
from resources.choices import (
    ALLOWED_FROM,
    INSTANCE_ACTIONS,
    OPEN_OPERATION_STATES,
    Action,
    InstanceStatus,
    OperationState,
    PowerState,
    state_table_key,
)
from resources.choices import SnapshotStatus as SS
from resources.models import Instance, Operation, Snapshot
from resources.selectors import check_can_act
from resources.services.operations import operation_create


# ---------------------------------------------------------------------------- idempotency
def _operation_for_key(*, user: AbstractBaseUser, key: str, digest: str) -> Operation | None:
    return replay_for_key(
        Operation.objects.filter(requested_by=user),
        key=key,
        digest=digest,
        digest_field="request_sha256",
        what="request",
        new="action",
    )


class _Replayed(Exception):
    """make() found, once its locks were held, the Operation a twin request with the same key made."""

    def __init__(self, operation: Operation) -> None:
        super().__init__(str(operation.pk))
        self.operation = operation


def _recheck_key(*, user, key: str, digest: str) -> None:
    """Inside make(), right after the locks: a twin that held them first has committed its Operation by now,
    and this request is its replay (not a second action refused as in flight or over quota)."""
    existing = _operation_for_key(user=user, key=key, digest=digest)
    if existing is not None:
        raise _Replayed(existing)


def _save_operation(*, user, key: str, digest: str, make) -> tuple[Operation, bool]:
    """Run `make()` (which creates the Operation) in a transaction; a racing twin with the same key wins."""
    try:
        with transaction.atomic():
            operation = make()
            transaction.on_commit(lambda: dispatch.enqueue_operation(str(operation.pk)))
            return operation, True
    except _Replayed as replay:
        return replay.operation, False
    except IntegrityError:
        existing = _operation_for_key(user=user, key=key, digest=digest)
        if existing is None:
            raise
        return existing, False


def _lock(connection_id: int, project_id: int) -> None:
    """The admission discipline: the connection row first, then the project row, in the same lock mode (NO KEY
    UPDATE: a concurrent insert's foreign-key check on those rows is not blocked, so it cannot deadlock)."""
    CloudConnection.objects.select_for_update(no_key=True).filter(pk=connection_id).first()
    Project.objects.select_for_update(no_key=True).filter(pk=project_id).first()


def _backend(connection: CloudConnection):
    try:
        return get_instance_backend(connection)
    except Unsupported as exc:
        raise UnsupportedAction(exc.message, errors=[{"field": "cloud", "message": exc.message}]) from None


def _cloud_read(what: str, field: str, function, *args):
    """A read the request needs (a flavor's size, an image id); what the cloud does not have is `field`'s 400."""
    try:
        return function(*args)
    except BackendError as exc:
        raise cloud_error(exc, doing=what, field=field) from None


def check_site_limits(flavor) -> None:
    """Site limits on one instance's size (settings INSTANCE_MAX_VCPUS / INSTANCE_MAX_MEMORY_MB)."""
    max_vcpus = getattr(settings, "INSTANCE_MAX_VCPUS", 16)
    max_memory = getattr(settings, "INSTANCE_MAX_MEMORY_MB", 65536)
    if flavor.vcpus > max_vcpus or flavor.memory_mb > max_memory:
        what = "you asked for" if flavor.name == "asked for" else f"flavor {flavor.name} has"
        message = (
            f"{what} {flavor.vcpus} vCPU / {flavor.memory_mb} MB; this site allows instances "
            f"of at most {max_vcpus} vCPU / {max_memory} MB"
        )
        field = "vcpus" if flavor.vcpus > max_vcpus else "memory_mb"
        raise InvalidSpec(
            message, errors=[{"field": "flavor" if flavor.name != "asked for" else field, "message": message}]
        )


# ---------------------------------------------------------------------------- create
def instance_create(
    *, user: AbstractBaseUser, data: dict[str, Any], idempotency_key: str = "", snapshot: Snapshot | None = None
) -> tuple[Operation, bool]:
    """A new instance (Pending) and its create Operation. `data`: name, cloud, project?, image, and
    either flavor or vcpus + memory_mb (the smallest fitting flavor is chosen, within the site limits);
    ssh_keys? (names of the user's keys; omitted: all of them, resources.access).

    With `snapshot`, the image is the snapshot's and the project must be the snapshot's own.
    """
    digest = canonical_sha256({"action": "create", "snapshot": str(snapshot.pk) if snapshot else "", **data})
    existing = _operation_for_key(user=user, key=idempotency_key, digest=digest)
    if existing:
        return existing, False
    connection, project, flavor, image, asked, keys = instance_create_check(user=user, data=data, snapshot=snapshot)
    volumes = [{"name": v.get("name") or "", "size_gb": int(v["size_gb"])} for v in data.get("volumes") or []]

    def make() -> Operation:
        _lock(connection.pk, project.pk)
        _recheck_key(user=user, key=idempotency_key, digest=digest)
        if snapshot is not None:
            _lock_restorable(snapshot)
        quotas.check_instance_fits(project=project, connection_id=connection.pk, asked=asked)
        instance = Instance.objects.create(
            name=data["name"],
            project=project,
            owner=user,
            connection=connection,
            backend=connection.backend,
            flavor=flavor.name,
            vcpus=flavor.vcpus,
            memory_mb=flavor.memory_mb,
            disk_gb=flavor.disk_gb,
            image=image,
            volumes=volumes,
            volumes_gb=sum(v["size_gb"] for v in volumes),
            ssh_keys=[{"name": key.name, "fingerprint": key.fingerprint} for key in keys],
            authorized_keys="\n".join(key.public_key for key in keys),
            login_user=login_user(connection),
            desired_power_state=PowerState.RUNNING,
            status=InstanceStatus.PENDING,
            status_reason="waiting for the create operation",
        )
        params = {"flavor": flavor.name, "flavor_id": flavor.id, "image": image, "ssh_keys": [k.name for k in keys]}
        if volumes:
            params["volumes"] = volumes
        if snapshot is not None:
            params["snapshot"] = str(snapshot.pk)
        operation = operation_create(
            project=project,
            instance=instance,
            snapshot=snapshot,
            action=Action.CREATE,
            requested_by=user,
            idempotency_key=idempotency_key,
            request_sha256=digest,
            params=params,
        )
        Instance.objects.filter(pk=instance.pk).update(operation=operation)
        return operation

    return _save_operation(user=user, key=idempotency_key, digest=digest, make=make)


def instance_create_check(
    *, user: AbstractBaseUser, data: dict[str, Any], snapshot: Snapshot | None = None, image_needed: bool = True
) -> tuple[CloudConnection, Project, Any, str, quotas.InstanceFootprint, list]:
    """The checks of a create that refuse a bad request (400/403/404 naming the field), before quotas:
    (connection, project, flavor, image id, footprint, the owner's SSH keys to give it). Shared with the dry
    run (resources.fit); without `image_needed` (the launch form's verdict while no image is chosen yet) an
    empty image is not looked up."""
    if snapshot is not None:
        if snapshot.status != SS.AVAILABLE:
            raise InvalidState(f"snapshot {snapshot.name} is {snapshot.status}; only an available one restores")
        connection = snapshot.connection
        if data.get("project") and data["project"] != snapshot.project.slug:
            raise _foreign_project(snapshot, data["project"])
        check_can_act(user=user, project=snapshot.project)
        # the same grant check as any create: a project that lost the connection restores nothing onto it
        project = project_for_submission(user=user, connection=connection, slug=snapshot.project.slug)
    else:
        connection = connection_for_user(user=user, cloud_id=data["cloud"])
        project = project_for_submission(user=user, connection=connection, slug=data.get("project"))
    keys = keys_for_instance(user=user, names=data.get("ssh_keys"))  # the owner's: unknown names are a 400
    backend = _backend(connection)
    _refused_by_backend(backend, None, Action.CREATE, {"snapshot": str(snapshot.pk)} if snapshot else {})
    if data.get("flavor"):
        flavor = _cloud_read("reading the flavor", "flavor", backend.flavor, data["flavor"])
    else:
        check_site_limits(SimpleNamespace(name="asked for", vcpus=data["vcpus"], memory_mb=data["memory_mb"]))
        flavor = _cloud_read(
            "choosing a flavor",
            "vcpus",
            lambda: backend.flavor_fitting(vcpus=data["vcpus"], memory_mb=data["memory_mb"]),
        )
    check_site_limits(flavor)
    if snapshot is not None:
        image = snapshot.image_id
    elif data.get("image") or image_needed:
        image = _cloud_read("finding the image", "image", backend.image_ref, data["image"])
        _refuse_foreign_snapshot_image(backend, image, project)
    else:
        image = ""
    asked = quotas.InstanceFootprint(
        instances=1,
        vcpus=flavor.vcpus,
        memory_mb=flavor.memory_mb,
        volume_gb=flavor.disk_gb + _volumes_gb(backend, connection, data.get("volumes") or []),
    )
    return connection, project, flavor, image, asked, keys


def _volumes_gb(backend, connection: CloudConnection, volumes: list[dict[str, Any]]) -> int:
    """The GB of the extra data volumes asked for; a 400 on `volumes` where the cloud has no volumes to make."""
    if volumes and not backend.has_block_storage:
        message = f"the {connection.cloud_id} cloud offers no volumes to attach: " + (
            "it has no block storage (Cinder)" if connection.backend == "openstack" else NO_KUBEVIRT_VOLUMES
        )
        raise InvalidSpec(message, errors=[{"field": "volumes", "message": message}])
    return sum(int(v["size_gb"]) for v in volumes)


NO_KUBEVIRT_VOLUMES = "its connection gives VMs no DataVolume storage (vm_root_disk is not set)"


def _foreign_project(snapshot: Snapshot, slug: str, *, field: str = "project") -> ApplicationError:
    message = (
        f"snapshot {snapshot.name} belongs to project {snapshot.project.slug}; "
        f"it cannot be restored into project {slug}"
    )
    return PermissionDenied(message, errors=[{"field": field, "message": message}], code="restore_other_project")


def _refuse_foreign_snapshot_image(backend, image: str, project: Project) -> None:
    """A plain create must not boot another project's snapshot: the rule tasks share (clusters.ownership).
    KubeVirt snapshots are not bootable images (image_snapshot_ref answers ""), so only the row check applies."""
    marked = _cloud_read("reading the image", "image", backend.image_snapshot_ref, image)
    check_image_for_project(image_id=image, snapshot_mark=marked, project_id=project.pk, project_slug=project.slug)


# ---------------------------------------------------------------------------- actions
def instance_action(
    *, user: AbstractBaseUser, instance: Instance, action: str, params: dict[str, Any], idempotency_key: str = ""
) -> tuple[Operation, bool]:
    """Ask for one action on an instance (see ALLOWED_FROM); returns (operation, created)."""
    check_can_act(user=user, project=instance.project)
    if not connection_granted(connection_id=instance.connection_id, project_id=instance.project_id):
        words = grant_withdrawn_words(cloud_id=instance.connection.cloud_id, project_slug=instance.project.slug)
        raise PermissionDenied(f"{words}; no action can be taken there", code="cloud_not_granted")
    digest = canonical_sha256({"instance": str(instance.pk), "action": action, **params})
    existing = _operation_for_key(user=user, key=idempotency_key, digest=digest)
    if existing:
        return existing, False
    if action not in INSTANCE_ACTIONS:
        raise InvalidSpec(
            f"unknown action '{action}'",
            errors=[{"field": "action", "message": f"one of: {', '.join(INSTANCE_ACTIONS)}"}],
        )
    if action == Action.START and params.get("boot_id") is not None:
        done = _start_already_done(instance, int(params["boot_id"]))
        if done is not None:
            return done, False
    _refused_by_backend(_backend(instance.connection), instance, action, params)
    params = _checked_params(instance, action, params)
    snapshot = params.pop("_snapshot", None)
    flavor = params.pop("_flavor", None)

    def make() -> Operation:
        _lock(instance.connection_id, instance.project_id)
        _recheck_key(user=user, key=idempotency_key, digest=digest)
        locked = Instance.objects.select_for_update().get(pk=instance.pk)
        _check_state(locked, action, params)
        if snapshot is not None:
            _lock_restorable(snapshot)
        if flavor is not None:
            asked = quotas.InstanceFootprint(
                vcpus=flavor.vcpus - locked.vcpus,
                memory_mb=flavor.memory_mb - locked.memory_mb,
                volume_gb=0 if locked.root_volume_ref else flavor.disk_gb - locked.disk_gb,  # Nova keeps the volume
            )
            quotas.check_instance_fits(project=locked.project, connection_id=locked.connection_id, asked=asked)
        if action == Action.SNAPSHOT:
            quotas.check_snapshot_allowed(project=locked.project, connection_id=locked.connection_id)
        changes: dict[str, Any] = {}
        if action == Action.START:
            params["boot_id"] = max(int(params.get("boot_id") or 0), locked.boot_id + 1)
            changes = {"boot_id": params["boot_id"], "desired_power_state": PowerState.RUNNING}
        elif action == Action.STOP:
            changes = {"desired_power_state": PowerState.STOPPED}
        made_snapshot = snapshot
        if action == Action.SNAPSHOT:
            made_snapshot = Snapshot.objects.create(
                name=params["name"],
                project=locked.project,
                owner=user,
                connection=locked.connection,
                instance=locked,
            )
            params["snapshot"] = str(made_snapshot.pk)
        operation = operation_create(
            project=locked.project,
            instance=locked,
            snapshot=made_snapshot,
            action=action,
            requested_by=user,
            idempotency_key=idempotency_key,
            request_sha256=digest,
            params=params,
        )
        Instance.objects.filter(pk=locked.pk).update(operation=operation, **changes)
        return operation

    return _save_operation(user=user, key=idempotency_key, digest=digest, make=make)


def _start_already_done(instance: Instance, boot_id: int) -> Operation | None:
    """A start whose boot id was already asked for does nothing: the answer is that first start."""
    if boot_id > instance.boot_id:
        return None
    first = (
        instance.operations.filter(action=Action.START, params__boot_id=boot_id).order_by("created_at").first()
        or instance.operations.filter(action=Action.CREATE).first()
    )
    if first is None:
        raise Conflict(f"boot id {boot_id} is not newer than the instance's boot id {instance.boot_id}")
    return first


def _check_state(instance: Instance, action: str, params: dict[str, Any]) -> None:
    if instance.status == InstanceStatus.DELETED:
        raise InvalidState(f"instance {instance.name} is deleted")
    if instance.operation_id and instance.operation and instance.operation.state in OPEN_OPERATION_STATES:
        raise InvalidState(
            f"instance {instance.name} has a {instance.operation.action} operation in flight "
            f"({instance.operation.pk}); wait for it to finish"
        )
    allowed = ALLOWED_FROM[state_table_key(action, params)]
    if instance.status not in allowed:
        raise InvalidState(
            f"cannot {action.replace('_', ' ')} instance {instance.name} while it is {instance.status}; "
            f"allowed from {', '.join(sorted(allowed))}",
            errors=[{"field": "action", "message": f"not allowed while {instance.status}"}],
        )
    if action != Action.DELETE and not instance.server_id:
        raise InvalidState(f"instance {instance.name} has no server in the cloud yet")


def _refused_by_backend(backend, instance: Instance | None, action: str, params: dict[str, Any]) -> None:
    """A backend may refuse what its cloud has no equivalent for (KubeVirt: suspend) before any Operation."""
    found = _cloud_read("checking the action", "action", backend.refusal, instance, action, params)
    if found is not None:
        kind, field, message = found
        error = UnsupportedAction if kind == "unsupported" else InvalidState
        raise error(message, errors=[{"field": field, "message": message}])


def _checked_params(instance: Instance, action: str, params: dict[str, Any]) -> dict[str, Any]:
    """The action's parameters, validated; reads the cloud where a check needs it (flavor, block storage)."""
    out: dict[str, Any] = {}
    if action == Action.REBOOT:
        kind = params.get("type", "soft")
        if kind not in ("soft", "hard"):
            raise InvalidSpec("reboot type", errors=[{"field": "type", "message": "soft or hard"}])
        out["type"] = kind
    elif action == Action.START:
        if params.get("boot_id") is not None:
            out["boot_id"] = int(params["boot_id"])
    elif action == Action.SNAPSHOT:
        out["name"] = str(params.get("name") or f"{instance.name}-snapshot")[:100]
    elif action == Action.RESTORE:
        snapshot = _restorable(instance, params.get("snapshot"))
        out["snapshot"] = str(snapshot.pk)
        out["image"] = snapshot.image_id
        out["_snapshot"] = snapshot
    elif action == Action.RESIZE:
        if not params.get("flavor"):
            raise InvalidSpec("name the new flavor", errors=[{"field": "flavor", "message": "required"}])
        backend = _backend(instance.connection)
        flavor = _cloud_read("reading the flavor", "flavor", backend.flavor, params["flavor"])
        check_site_limits(flavor)
        if flavor.name == instance.flavor:
            raise InvalidSpec(
                f"the instance already has flavor {flavor.name}",
                errors=[{"field": "flavor", "message": "the same flavor"}],
            )
        out.update(flavor=flavor.name, flavor_id=flavor.id, _flavor=flavor)
    elif action == Action.DELETE:
        volumes = params.get("volumes")
        if volumes not in ("keep", "purge"):
            message = "say what happens to the instance's volumes: 'keep' or 'purge' (nothing is assumed)"
            raise InvalidSpec(message, errors=[{"field": "volumes", "message": message}])
        backend = _backend(instance.connection)
        try:
            has_block_storage = backend.has_block_storage
        except BackendError as exc:
            raise cloud_error(exc, doing="reading the catalog") from None
        if volumes == "purge" and not (has_block_storage and backend.deletes_volumes):
            message = (
                f"the {instance.connection.cloud_id} cloud has no block-storage (Cinder) service, so this instance "
                "has no volumes to purge; delete with volumes=keep"
                if not has_block_storage
                else "purging volumes is not implemented for this cloud yet; delete with volumes=keep"
            )
            raise UnsupportedAction(message, errors=[{"field": "volumes", "message": message}])
        out["volumes"] = volumes
        out["block_storage"] = has_block_storage
    return out


def _restorable(instance: Instance, snapshot_id: Any) -> Snapshot:
    if not snapshot_id:
        raise InvalidSpec("name the snapshot to restore", errors=[{"field": "snapshot", "message": "required"}])
    try:
        snapshot = Snapshot.objects.select_related("project").get(pk=snapshot_id)
    except (Snapshot.DoesNotExist, ValueError, TypeError, ValidationError):  # ValidationError: not a UUID
        snapshot = None
    if snapshot is None:
        raise InvalidSpec(
            f"snapshot {snapshot_id} not found",
            errors=[{"field": "snapshot", "message": "no such snapshot (unregistered snapshots are refused)"}],
        )
    if snapshot.project_id != instance.project_id:
        raise _foreign_project(snapshot, instance.project.slug)
    if snapshot.connection_id != instance.connection_id:
        raise InvalidSpec(
            "the snapshot is on another cloud",
            errors=[{"field": "snapshot", "message": f"it lives on {snapshot.connection.cloud_id}"}],
        )
    if snapshot.status != SS.AVAILABLE:
        raise InvalidState(f"snapshot {snapshot.name} is {snapshot.status}; only an available one restores")
    return snapshot


def _lock_restorable(snapshot: Snapshot) -> None:
    """Inside make(): the snapshot row locked (a delete or prune waits for this request to commit) and its
    status read again, since a delete may have claimed it after the first check."""
    locked = Snapshot.objects.select_for_update().get(pk=snapshot.pk)
    if locked.status != SS.AVAILABLE:
        raise InvalidState(f"snapshot {locked.name} is {locked.status}; only an available one restores")


def snapshot_restores_in_flight(snapshot: Snapshot):
    """The open Operations booting or rebuilding from this snapshot: its image must outlive them."""
    return Operation.objects.filter(
        snapshot=snapshot, action__in=(Action.RESTORE, Action.CREATE), state__in=OPEN_OPERATION_STATES
    )


def snapshot_delete(*, user: AbstractBaseUser, snapshot: Snapshot, idempotency_key: str = "") -> tuple[Operation, bool]:
    check_can_act(user=user, project=snapshot.project)
    digest = canonical_sha256({"snapshot": str(snapshot.pk), "action": Action.SNAPSHOT_DELETE})
    existing = _operation_for_key(user=user, key=idempotency_key, digest=digest)
    if existing:
        return existing, False

    def make() -> Operation:
        locked = Snapshot.objects.select_for_update().get(pk=snapshot.pk)
        _recheck_key(user=user, key=idempotency_key, digest=digest)
        if locked.status not in (SS.AVAILABLE, SS.FAILED):
            raise InvalidState(f"snapshot {locked.name} is {locked.status}")
        in_use = snapshot_restores_in_flight(locked).first()
        if in_use is not None:
            raise InvalidState(
                f"snapshot {locked.name} is being restored by operation {in_use.pk} ({in_use.action}); "
                "delete it once that operation has finished"
            )
        Snapshot.objects.filter(pk=locked.pk).update(status=SS.DELETING)
        return operation_create(
            project=locked.project,
            instance=locked.instance,
            snapshot=locked,
            action=Action.SNAPSHOT_DELETE,
            requested_by=user,
            idempotency_key=idempotency_key,
            request_sha256=digest,
            params={"image": locked.image_id},
            state=OperationState.PENDING,
        )

    return _save_operation(user=user, key=idempotency_key, digest=digest, make=make)
