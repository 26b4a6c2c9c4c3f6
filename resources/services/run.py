"""Doing an Operation: ask the cloud, then poll until the post-condition is observed or the deadline passes.

An accepted request is never success (Nova answers 202 and works on): every action ends succeeded
only when a fresh read shows what it promised (ACTIVE with no task_state after a start, SHUTOFF after
a stop, the image active after a snapshot, the server gone after a delete).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from cloudpivot.crash_points import crash_point
from clusters.selectors import connection_granted, grant_withdrawn_words
from resources.access import user_data_for
from resources.backends import get_instance_backend
from resources.backends.base import BackendError, CreateRequest, DataVolume, ServerView
from resources.choices import SETTLES_AT, Action, InstanceStatus, OperationState, PowerState, SnapshotStatus
from resources.cloud_quota import quota_message
from resources.models import Instance, KeptVolume, Operation, Snapshot
from resources.services.lease import Lease, lease_end, max_resumes, worker_name
from resources.services.operations import operation_transition
from resources.services.readiness import BOOTS, readiness_after_operation, readiness_reset
from resources.services.snapshots import snapshots_prune_over_quota
from resources.services.timing import deadline_seconds, operation_budget_seconds, poll_interval
from resources.services.volumes import in_use_words, volume_reclaimed, volumes_keep_record, volumes_purge

S = InstanceStatus
logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker resumed this Operation (this one stalled past its lease): stop, write nothing."""


class OperationFailed(Exception):
    def __init__(self, message: str, *, kind: str = "failed") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


def operation_run(*, operation_id: str) -> str:
    holder = worker_name()
    with transaction.atomic():
        operation = Operation.objects.select_for_update().filter(pk=operation_id).first()
        now = timezone.now()
        resuming = (
            operation is not None
            and operation.state == OperationState.RUNNING
            and operation.lease_until is not None
            and operation.lease_until < now
            and operation.resumes < max_resumes()
        )
        if operation is None or (operation.state != OperationState.PENDING and not resuming):
            # running under a live lease: another worker has it; its lease ran out: the reaper (or this very
            # job, re-delivered) resumes it; finished: nothing left. So a second enqueue is a no-op.
            return "nothing to do"
        operation_transition(
            operation=operation,
            to=OperationState.RUNNING,
            started_at=operation.started_at or now,
            claimed_by=holder,
            lease_until=lease_end(),
            resumes=operation.resumes + (1 if resuming else 0),
        )
    lease = Lease(operation_id, holder).start()
    try:
        return _operation_run(operation_id, holder, lease, resuming)
    finally:
        lease.stop()


def _operation_run(operation_id: str, holder: str, lease: Lease, resuming: bool) -> str:
    runner = OperationExecutor(Operation.objects.select_related("instance", "snapshot", "project").get(pk=operation_id))
    runner.holder, runner.lease, runner.resuming = holder, lease, resuming
    if resuming:
        resumes = runner.operation.resumes
        logger.warning("operation %s resumed (resume %d): its worker's lease ran out", operation_id, resumes)
    if not connection_granted(connection_id=runner.connection.pk, project_id=runner.operation.project_id):
        # queued before an admin removed the project's grant on this cloud: refused, with the reason
        words = grant_withdrawn_words(cloud_id=runner.connection.cloud_id, project_slug=runner.operation.project.slug)
        runner.finish(OperationState.FAILED, kind="not_granted", message=f"refused: {words}")
        return f"refused: {words}"
    try:
        result = runner.run()
    except LeaseLost:
        return "lease lost: another worker resumed it"
    except OperationFailed as exc:
        runner.finish(OperationState.FAILED, kind=exc.kind, message=exc.message)
        return f"failed: {exc.message}"
    except BackendError as exc:
        kind = "quota_exceeded" if exc.kind == "quota" else exc.kind
        message = quota_message(exc.message) if exc.kind == "quota" else exc.message
        runner.finish(OperationState.FAILED, kind=kind, message=message)
        return f"failed: {message}"
    except Exception:  # anything else: the Operation must still end, or it holds the instance for ever
        # the exception's words may carry cloud internals (URLs, tokens in a repr): the log has them, users a reference
        logger.exception("operation %s failed unexpectedly (reference %s)", operation_id, operation_id)
        message = f"internal error (reference {operation_id}); the details are in the server log"
        runner.finish(OperationState.FAILED, kind="internal", message=message)
        return f"failed: {message}"
    if resuming:
        result = {**result, "resumed": runner.operation.resumes}
    runner.finish(OperationState.SUCCEEDED, result=result)
    if runner.instance is not None:  # the read-back's one look at the guest (resources/services/readiness.py)
        readiness_after_operation(runner.instance.pk, runner.last_view, runner.connection)
    return "succeeded"


class OperationExecutor:
    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.instance: Instance | None = operation.instance
        self.connection = (operation.instance or operation.snapshot).connection
        self.last_view: ServerView | None = None
        self.last_words = ""  # what was last seen of the thing awaited, for a timeout's message
        self.budget_ends = time.monotonic() + operation_budget_seconds()
        self.holder = ""  # the claim operation_run holds ("" for the reaper, which finishes rows it locked)
        self.lease: Lease | None = None
        self.resuming = False  # a new worker took over from one whose lease ran out

    @property
    def backend(self):
        return get_instance_backend(self.connection)

    # ------------------------------------------------------------------ the actions
    def run(self) -> dict[str, Any]:
        action = self.operation.action
        params = self.operation.params
        if action in BOOTS:  # the guest boots (again): not ready until this boot's guest answers
            readiness_reset(self.instance, self.backend)
        if action == Action.CREATE:
            return self.create()
        if action == Action.SNAPSHOT_DELETE:
            return self.snapshot_delete()
        if action == Action.VOLUME_RECLAIM:
            return self.volume_reclaim()
        server = self.instance.server_id
        if action in SETTLES_AT:  # the backend method has the action's name
            if self.must_call(lambda view: view.status == SETTLES_AT[action]):
                call: Callable[[str], None] = getattr(self.backend, action)
                call(server)
                self.called()
            view = self.wait_status(SETTLES_AT[action])
            return {"observed": view.evidence}
        if action == Action.REBOOT:
            if self.must_call():  # a reboot leaves no trace to read: the note of the call decides
                self.backend.reboot(server, hard=params.get("type") == "hard")
                self.called()
            view = self.wait_status(S.RUNNING)
            return {"observed": view.evidence, "type": params.get("type", "soft")}
        if action == Action.SNAPSHOT:
            return self.snapshot()
        if action == Action.RESTORE:
            return self.restore()
        if action == Action.RESIZE:
            return self.resize()
        if action == Action.DELETE:
            return self.delete()
        raise OperationFailed(f"unknown action {action}", kind="invalid_spec")

    def create(self) -> dict[str, Any]:
        params = self.operation.params
        if self.resuming:
            self.instance.refresh_from_db(fields=["server_id"])
        server_id = self.instance.server_id
        if not server_id:
            # on a resume too: the backend adopts a server an earlier try made (OpenStack: the instance's tag;
            # KubeVirt: the VM's name from the instance id), so a create killed before it wrote the id
            # makes no second one
            request = CreateRequest(
                instance_id=str(self.instance.pk),
                name=self.instance.name,
                flavor_id=params["flavor_id"],
                image=params["image"],
                user_data=user_data_for(self.instance),
                volumes=tuple(DataVolume(v["size_gb"], v.get("name") or "") for v in params.get("volumes") or []),
            )
            server_id = self._ask_once(
                lambda: self.backend.create(request),
                look=lambda: self.backend.server_made_for(request.instance_id),
                what=f"the server of instance {request.name!r}",
            )
            self.called()  # the server exists, the instance does not name it yet
            Instance.objects.filter(pk=self.instance.pk).update(server_id=server_id)
            self.instance.server_id = server_id
        view = self.wait_status(S.RUNNING)
        result = {"server_id": server_id, "observed": view.evidence}
        root_volume = self.backend.root_volume(server_id, str(self.instance.pk))
        if root_volume:  # booted from a volume: the disk a delete keeps unless purged (orphans know it by this)
            Instance.objects.filter(pk=self.instance.pk).update(root_volume_ref=root_volume)
            result["root_volume"] = root_volume
        return result

    def snapshot(self) -> dict[str, Any]:
        snapshot = self.operation.snapshot
        if self.resuming:
            snapshot.refresh_from_db(fields=["image_id"])
        image_id = snapshot.image_id
        if image_id:  # a resume after the cloud took the snapshot: wait for the server's task to clear
            self.settled_view()
        else:
            before = self.observe()
            image_id = self._take_snapshot(snapshot)
            Snapshot.objects.filter(pk=snapshot.pk).update(image_id=image_id)
            self.called()
            original = before.status if before else S.RUNNING
            self.wait_status(original)  # the server's image_snapshot task_state has cleared

        def image_ready():
            image = self.backend.image(image_id)
            self.last_words = f"image status {image.status}" if image else "no image in the cloud"
            if image is None or image.status in ("killed", "deleted", "deactivated"):
                raise OperationFailed(
                    f"the snapshot image {image_id} went {image.status if image else 'missing'}", kind="failed"
                )
            return image if image.ready else None

        image = self.wait(image_ready, f"snapshot image {image_id} active")
        Snapshot.objects.filter(pk=snapshot.pk).update(
            status=SnapshotStatus.AVAILABLE, size_bytes=image.size_bytes, status_reason=""
        )
        pruned = snapshots_prune_over_quota(project=self.operation.project, connection=self.connection, keep=snapshot)
        return {"image_id": image_id, "size_bytes": image.size_bytes, "pruned": pruned}

    def _take_snapshot(self, snapshot: Snapshot) -> str:
        """Ask for the snapshot's image at most once (nova-api makes a volume-booted server's Cinder snapshot
        before it answers, which can outlast the API timeout). A resume adopts what an earlier try made."""
        made_as, name = str(snapshot.pk), snapshot.name
        if self.resuming and (found := self.backend.snapshot_image(made_as, name=name)):
            return found
        metadata = {"cloudpivot_snapshot": made_as, "cloudpivot_instance": str(self.instance.pk)}
        return self._ask_once(
            lambda: self.backend.snapshot(self.instance.server_id, name=name, metadata=metadata),
            look=lambda: self.backend.snapshot_image(made_as, name=name),
            what=f"the image of snapshot {name!r}",
        )

    def _ask_once(self, call: Callable[[], str], *, look: Callable[[], str | None], what: str) -> str:
        """Make a call that is not idempotent everywhere at most once. The cloud goes on after its answer was
        lost to a timeout, so then `look` awaits what it made (the Operation's deadline, budget and lease);
        a look the slow cloud leaves unanswered is looked again."""
        try:
            return call()
        except BackendError as exc:
            if exc.kind != "transient":
                raise
            lost = exc.message

        def made() -> str | None:
            try:
                return look()
            except BackendError as exc:
                if exc.kind != "transient":
                    raise
                return None

        return self.wait(made, f"{what}, asked for when {lost}")

    def restore(self) -> dict[str, Any]:
        image_id = self.operation.params["image"]
        before = self.observe()
        if self.must_call():  # the same image before and after is possible: the note of the call decides
            self.backend.rebuild(self.instance.server_id, image_id=image_id)
            self.called()
        # Nova sets task_state rebuilding before answering; wait for it to clear with the new image in place.
        wanted = {before.status} if before and before.status in (S.RUNNING, S.STOPPED) else {S.RUNNING, S.STOPPED}

        def rebuilt():
            view = self.observe()
            self.fail_on_error(view)
            if view and view.settled and view.status in wanted and view.image_id == image_id:
                return view
            return None

        view = self.wait(rebuilt, f"server rebuilt from image {image_id}")
        Instance.objects.filter(pk=self.instance.pk).update(image=image_id)
        return {"image_id": image_id, "observed": view.evidence}

    def resize(self) -> dict[str, Any]:
        params = self.operation.params
        if self.must_call(lambda view: view.raw_status == "VERIFY_RESIZE" or view.flavor == params["flavor"]):
            self.backend.resize(self.instance.server_id, flavor_id=params["flavor_id"])
            self.called()

        def verify():
            view = self.observe()
            self.fail_on_error(view)
            if view.settled and view.raw_status in ("ACTIVE", "SHUTOFF") and view.flavor == params["flavor"]:
                return view  # confirmed already (a resume after the confirm)
            if view.settled and view.raw_status in ("ACTIVE", "SHUTOFF") and view.flavor != params["flavor"]:
                # Nova set task_state resize_prep before it answered: settled on the old flavor means it gave up
                why = self.backend.action_failure(self.instance.server_id, "resize") or "no reason given"
                raise OperationFailed(
                    f"the resize did not happen: the server is {view.raw_status} on flavor {view.flavor} again; {why}"
                )
            return view if view.raw_status == "VERIFY_RESIZE" and view.settled else None

        if self.wait(verify, "server in VERIFY_RESIZE").raw_status == "VERIFY_RESIZE":
            self.backend.confirm_resize(self.instance.server_id)

        def confirmed():
            view = self.observe()
            self.fail_on_error(view)
            ok = view and view.settled and view.raw_status != "VERIFY_RESIZE" and view.flavor == params["flavor"]
            return view if ok else None

        view = self.wait(confirmed, f"server on flavor {params['flavor']}")
        flavor = self.backend.flavor(params["flavor"])
        disk_gb = self.instance.disk_gb if self.instance.root_volume_ref else flavor.disk_gb  # a volume stays its size
        Instance.objects.filter(pk=self.instance.pk).update(
            flavor=flavor.name, vcpus=flavor.vcpus, memory_mb=flavor.memory_mb, disk_gb=disk_gb
        )
        return {"flavor": flavor.name, "observed": view.evidence}

    def delete(self) -> dict[str, Any]:
        server = self.instance.server_id
        kept: list[str] = []
        if server and self.resuming and self.backend.server(server) is None:
            # resumed after the server went: done; what it kept was checked by nobody
            Instance.objects.filter(pk=self.instance.pk).update(deleted_at=timezone.now())
            return {"server_id": server, "volumes": "the server was gone when the delete was resumed", "kept": []}
        recorded: list[dict[str, Any]] = []
        if server:
            backend = self.backend
            kept = backend.volumes_to_keep(server)
            if kept and backend.stops_before_delete:
                self.stop_before_delete(server)
            backend.delete(server)
            self.called()

            def gone():
                return True if backend.server(server) is None else None

            self.wait(gone, f"server {server} gone")
            if self.operation.params.get("volumes") == "purge":
                purged, recorded = volumes_purge(self, kept)
                Instance.objects.filter(pk=self.instance.pk).update(deleted_at=timezone.now())
                return {
                    "server_id": server,
                    "volumes": f"purged: {', '.join(purged) or 'none'}",
                    "purged": purged,
                    "kept": [v["ref"] for v in recorded],
                    "kept_volumes": recorded,
                }
            lost = backend.lost_volumes(server, kept)
            # each survivor holds its GB of the volume quota until reclaimed (services.volumes)
            recorded = volumes_keep_record(
                instance=self.instance, backend=backend, refs=[v for v in kept if v not in lost]
            )
            if lost:
                Instance.objects.filter(pk=self.instance.pk).update(deleted_at=timezone.now())
                raise OperationFailed(
                    f"the server {server} was deleted, but {', '.join(lost)} did not survive it: "
                    "the disk was lost with it, although the delete was asked to keep it",
                    kind="volume_lost",
                )
        if kept:
            volumes = f"kept: {', '.join(kept)} (checked after the server was gone)"
        elif not server:
            volumes = "none to keep: no server was made"
        elif self.operation.params.get("block_storage"):
            volumes = "none to keep: the server had no volumes; its root disk was ephemeral and went with it"
        else:
            volumes = (
                f"none to keep: the {self.connection.cloud_id} cloud has no block-storage service; "
                "the server's root disk was ephemeral and went with it"
            )
        Instance.objects.filter(pk=self.instance.pk).update(deleted_at=timezone.now())
        return {"server_id": server, "volumes": volumes, "kept": kept, "kept_volumes": recorded}

    def volume_reclaim(self) -> dict[str, Any]:
        """Read the kept volume again (a guest may have mounted it since the request), delete it, see it gone."""
        volume = KeptVolume.objects.get(pk=self.operation.params["volume"])
        backend = self.backend
        view = backend.volume(volume.ref)
        if view is not None:
            if view.users:
                raise OperationFailed(in_use_words(volume, view), kind="volume_in_use")
            backend.delete_volume(volume.ref)
            crash_point("operation.called")
            self.wait(lambda: True if backend.volume(volume.ref) is None else None, f"{volume.ref} gone")
        return volume_reclaimed(volume, self.operation, deleted=view is not None)

    def stop_before_delete(self, server: str) -> None:
        """Stop the server and see it stopped before its disks are let go (the old writer has stopped).
        Stopped is then what CloudPivot wants too: if the delete fails later, no refresh takes the stop for
        the guest's."""
        view = self.observe()
        if view is not None and view.status == S.STOPPED and view.settled:
            return
        Instance.objects.filter(pk=self.instance.pk).update(desired_power_state=PowerState.STOPPED)
        self.backend.stop(server)
        self.wait_status(S.STOPPED)

    def snapshot_delete(self) -> dict[str, Any]:
        snapshot = self.operation.snapshot
        if snapshot.image_id:
            self.delete_volume_snapshots(snapshot.image_id)
            if not (self.resuming and self.backend.image(snapshot.image_id) is None):
                self.backend.delete_image(snapshot.image_id)
                self.called()

            def gone():
                image = self.backend.image(snapshot.image_id)
                return True if image is None or image.status == "deleted" else None

            self.wait(gone, f"image {snapshot.image_id} gone")
        Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.DELETED, deleted_at=timezone.now())
        return {"image_id": snapshot.image_id}

    def delete_volume_snapshots(self, image_id: str) -> None:
        """The block-storage snapshots the image boots from (a volume-booted server's snapshot) go first, and
        are seen gone, while the image still names them: none outlives the image, and a resume finds them."""
        if not self.backend.delete_image_volume_snapshots(image_id):
            return

        def gone():
            left = self.backend.image_volume_snapshots(image_id)
            self.last_words = ", ".join(f"volume snapshot {ref} {status}" for ref, status in left.items())
            for ref, status in left.items():
                if status in ("available", "error_deleting"):  # Cinder took the delete and gave up on it
                    raise OperationFailed(
                        f"the cloud did not delete volume snapshot {ref} (it is {status} again); a volume made "
                        "from it may still depend on it: delete such volumes, or ask an admin to look at Cinder",
                        kind="failed",
                    )
            return True if not left else None

        self.wait(gone, f"the volume snapshots of image {image_id} gone")

    # ------------------------------------------------------------------ resuming
    def called(self) -> None:
        """The cloud accepted the action: noted before anything is read back, so that a resume does not ask
        again for what leaves no trace to read (a reboot) or cannot be told apart (a rebuild, a resize)."""
        Operation.objects.filter(pk=self.operation.pk).update(called_at=timezone.now())
        crash_point("operation.called")

    def must_call(self, done: Callable[[ServerView], bool] | None = None) -> bool:
        """Whether to ask the cloud for the action: always on a first run. On a resume, "already done?":
        - `done` given (the action's effect can be read): once the cloud has no task in flight on the server
          (it would refuse a second request meanwhile), ask only if `done` does not see the effect. A stop
          whose server is SHUTOFF succeeds without asking again (Nova answers a second stop with a 409).
        - `done` None (a reboot leaves nothing to read, a rebuild may keep the image): the note of the call
          decides; not noted (the worker died before its call, or in the instant after it), ask again once
          the server has no task in flight."""
        if not self.resuming:
            return True
        if done is None and self.operation.called_at is not None:
            return False
        view = self.settled_view()
        return done is None or not done(view)

    def settled_view(self) -> ServerView:
        def settled():
            view = self.observe()
            self.fail_on_error(view)
            return view if view.settled else None

        return self.wait(settled, "the server with no task in flight")

    # ------------------------------------------------------------------ observing
    def observe(self) -> ServerView | None:
        view = self.backend.server(self.instance.server_id) if self.instance.server_id else None
        self.last_view = view
        if view is not None:
            self.last_words = f"{view.raw_status} task_state={view.task_state or 'none'}"
        if view is not None:
            now = timezone.now()
            Instance.objects.filter(pk=self.instance.pk).update(
                status=view.status,
                status_reason=server_reason(view),
                address=view.address,
                observed_at=now,
                status_changed_at=status_clock(view.status, now),
            )
        return view

    def fail_on_error(self, view: ServerView | None) -> None:
        if view is None:
            raise OperationFailed(f"server {self.instance.server_id} is no longer in the cloud", kind="not_found")
        if view.raw_status == "ERROR":
            raise OperationFailed(f"the server went to ERROR: {view.fault or 'Nova gave no fault message'}")

    def wait_status(self, wanted: str) -> ServerView:
        def reached():
            view = self.observe()
            self.fail_on_error(view)
            return view if view.settled and view.status == wanted else None

        return self.wait(reached, f"{wanted} with no task in flight")

    def wait(self, check: Callable[[], Any], what: str) -> Any:
        """Poll `check` until it answers; past the deadline, fail with what was last seen of the thing awaited
        (`last_words`: the server's status by default, the image's while a snapshot completes)."""
        self.last_words = ""
        started = time.monotonic()
        deadline = min(started + deadline_seconds(), self.budget_ends)
        while True:
            if self.lease is not None and self.lease.lost:
                raise LeaseLost()
            found = check()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                last = f"; last seen {self.last_words}" if self.last_words else ""
                waited = deadline - started
                raise OperationFailed(f"not observed within {waited:.0f} s: {what}{last}", kind="timeout")
            time.sleep(poll_interval())

    # ------------------------------------------------------------------ the end
    def finish(self, state: str, *, kind: str = "", message: str = "", result: dict | None = None) -> None:
        now = timezone.now()
        self.operation.error_kind = kind
        with transaction.atomic():
            # a worker ends only what it still holds (`holder`): not a row resumed by another one
            ended = operation_transition(
                operation=self.operation,
                to=state,
                holder=self.holder,
                error_kind=kind,
                error_message=message[:4000],
                result=result or {},
                finished_at=now,
            )
            if not ended:
                return
            if self.instance is not None:
                self._settle_instance(state, message)
            snapshot = self.operation.snapshot
            if snapshot is not None and state == OperationState.FAILED and self.operation.action == Action.SNAPSHOT:
                Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.FAILED, status_reason=message)
            if (
                snapshot is not None
                and state == OperationState.FAILED
                and self.operation.action == Action.SNAPSHOT_DELETE
            ):
                Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.AVAILABLE, status_reason=message)

    def _settle_instance(self, state: str, message: str) -> None:
        updates: dict[str, Any] = {"operation": None, "updated_at": timezone.now()}
        action = self.operation.action
        if state == OperationState.SUCCEEDED and action == Action.DELETE:
            updates.update(status=S.DELETED, status_reason="deleted")
        elif state == OperationState.FAILED and action == Action.DELETE and self.operation.error_kind == "volume_lost":
            updates.update(status=S.DELETED, status_reason=f"deleted, but a kept volume was lost: {message}")
        elif state == OperationState.FAILED:
            view = self.last_view
            if (
                action == Action.CREATE
                and not Instance.objects.filter(pk=self.instance.pk).exclude(server_id="").exists()
            ):
                updates.update(status=S.FAILED, status_reason=f"create failed: {message}")
            elif view is None and self.instance.server_id and self.operation.error_kind == "not_found":
                updates.update(status=S.UNKNOWN, status_reason=message)
            elif view is not None and view.raw_status == "ERROR":
                updates.update(status=S.FAILED, status_reason=server_reason(view))
        # only the Operation the instance's pointer names settles it: a snapshot delete (which points at the
        # snapshot's instance but never holds it) must not free the instance while another action runs
        if "status" in updates:
            updates["status_changed_at"] = status_clock(updates["status"], updates["updated_at"])
        Instance.objects.filter(pk=self.instance.pk, operation_id=self.operation.pk).update(**updates)


def status_clock(status: str, now: Any) -> Case:
    """`status_changed_at` for an update that sets `status`: now if the status changes, else unchanged."""
    return Case(When(status=status, then=F("status_changed_at")), default=Value(now))


def server_reason(view: ServerView) -> str:
    """An instance's status reason in words from one observation: "Nova: ERROR (spawning): <fault>"."""
    words = f"{view.source}: {view.raw_status}"
    if view.task_state:
        words += f" ({view.task_state})"
    if view.fault:
        words += f": {view.fault}"
    if view.evidence.get("note"):
        words += f"; {view.evidence['note']}"
    return words
