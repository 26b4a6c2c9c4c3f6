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

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from cloudpivot.crash_points import crash_point
from clusters.selectors import connection_granted, grant_withdrawn_words
from resources.access import user_data_for
from resources.backends import get_instance_backend
from resources.backends.base import BackendError, CreateRequest, ServerView
from resources.choices import SETTLES_AT, Action, InstanceStatus, OperationState, PowerState, SnapshotStatus
from resources.cloud_quota import quota_message
from resources.models import Instance, Operation, Snapshot
from resources.services.readiness import BOOTS, readiness_after_operation, readiness_reset
from resources.services.snapshots import snapshots_prune_over_quota

S = InstanceStatus
logger = logging.getLogger(__name__)


class OperationFailed(Exception):
    def __init__(self, message: str, *, kind: str = "failed") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


def _deadline_seconds() -> float:
    return float(getattr(settings, "INSTANCE_OPERATION_DEADLINE_SECONDS", 60))


def operation_budget_seconds() -> float:
    """One Operation's whole wall time: every wait stops at this total too, whatever its own deadline.

    A snapshot or resize waits twice (2 x INSTANCE_OPERATION_DEADLINE_SECONDS), which alone could outlast
    the job; the budget keeps the whole Operation inside operation_job_timeout(). Default: the cluster's
    retry minus 45 s (75 s with the default ticker).
    """
    configured = getattr(settings, "INSTANCE_OPERATION_BUDGET_SECONDS", None)
    return float(configured) if configured else float(settings.Q_CLUSTER.get("retry", 120)) - 45


def operation_job_timeout() -> int:
    """The django-q2 timeout of an operation job: the budget plus room for the last cloud call and finish().

    django-q2 re-delivers a task still unacknowledged after the cluster's `retry` seconds, so a task timeout
    at or above `retry` would run the job twice: the timeout is kept 10 s below `retry`.
    """
    retry = int(settings.Q_CLUSTER.get("retry", 120))
    return int(min(operation_budget_seconds() + 25, retry - 10))


def operation_lost_after_seconds() -> float:
    """A `running` Operation older than this has no live worker: its job was killed (or its worker died)."""
    return operation_job_timeout() + float(getattr(settings, "INSTANCE_OPERATION_LOST_MARGIN_SECONDS", 60))


def _poll_interval() -> float:
    return float(getattr(settings, "INSTANCE_POLL_SECONDS", 0.3))


def operation_run(*, operation_id: str) -> str:
    with transaction.atomic():
        operation = Operation.objects.select_for_update().filter(pk=operation_id).first()
        if operation is None or operation.state != OperationState.PENDING:
            # running: another job has it (the reaper ends it if that job died); finished: nothing left.
            # So a second enqueue of the same Operation (the reaper's re-enqueue, a broker retry) is a no-op.
            return "nothing to do"
        operation.state = OperationState.RUNNING
        operation.started_at = operation.started_at or timezone.now()
        operation.save(update_fields=["state", "started_at", "updated_at"])
    runner = Runner(Operation.objects.select_related("instance", "snapshot", "project").get(pk=operation_id))
    if not connection_granted(connection_id=runner.connection.pk, project_id=runner.operation.project_id):
        # queued before an admin removed the project's grant on this cloud: refused, with the reason
        words = grant_withdrawn_words(cloud_id=runner.connection.cloud_id, project_slug=runner.operation.project.slug)
        runner.finish(OperationState.FAILED, kind="not_granted", message=f"refused: {words}")
        return f"refused: {words}"
    try:
        result = runner.run()
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
    runner.finish(OperationState.SUCCEEDED, result=result)
    if runner.instance is not None:  # the read-back's one look at the guest (resources/services/readiness.py)
        readiness_after_operation(runner.instance.pk, runner.last_view, runner.connection)
    return "succeeded"


class Runner:
    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.instance: Instance | None = operation.instance
        self.connection = (operation.instance or operation.snapshot).connection
        self.last_view: ServerView | None = None
        self.last_words = ""  # what was last seen of the thing awaited, for a timeout's message
        self.budget_ends = time.monotonic() + operation_budget_seconds()

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
        server = self.instance.server_id
        if action in SETTLES_AT:  # the backend method has the action's name
            call: Callable[[str], None] = getattr(self.backend, action)
            call(server)
            crash_point("operation.called")
            view = self.wait_status(SETTLES_AT[action])
            return {"observed": view.evidence}
        if action == Action.REBOOT:
            self.backend.reboot(server, hard=params.get("type") == "hard")
            crash_point("operation.called")
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
        server_id = self.backend.create(
            CreateRequest(
                instance_id=str(self.instance.pk),
                name=self.instance.name,
                flavor_id=params["flavor_id"],
                image=params["image"],
                user_data=user_data_for(self.instance),
            )
        )
        crash_point("operation.called")  # the server exists, the instance does not name it yet
        Instance.objects.filter(pk=self.instance.pk).update(server_id=server_id)
        self.instance.server_id = server_id
        view = self.wait_status(S.RUNNING)
        return {"server_id": server_id, "observed": view.evidence}

    def snapshot(self) -> dict[str, Any]:
        snapshot = self.operation.snapshot
        before = self.observe()
        image_id = self.backend.snapshot(
            self.instance.server_id,
            name=snapshot.name,
            metadata={"cloudpivot_snapshot": str(snapshot.pk), "cloudpivot_instance": str(self.instance.pk)},
        )
        crash_point("operation.called")
        Snapshot.objects.filter(pk=snapshot.pk).update(image_id=image_id)
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

    def restore(self) -> dict[str, Any]:
        image_id = self.operation.params["image"]
        before = self.observe()
        self.backend.rebuild(self.instance.server_id, image_id=image_id)
        crash_point("operation.called")
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
        self.backend.resize(self.instance.server_id, flavor_id=params["flavor_id"])
        crash_point("operation.called")

        def verify():
            view = self.observe()
            self.fail_on_error(view)
            if view.settled and view.raw_status in ("ACTIVE", "SHUTOFF") and view.flavor != params["flavor"]:
                # Nova set task_state resize_prep before it answered: settled on the old flavor means it gave up
                why = self.backend.action_failure(self.instance.server_id, "resize") or "no reason given"
                raise OperationFailed(
                    f"the resize did not happen: the server is {view.raw_status} on flavor {view.flavor} again; {why}"
                )
            return view if view.raw_status == "VERIFY_RESIZE" and view.settled else None

        self.wait(verify, "server in VERIFY_RESIZE")
        self.backend.confirm_resize(self.instance.server_id)

        def confirmed():
            view = self.observe()
            self.fail_on_error(view)
            ok = view and view.settled and view.raw_status != "VERIFY_RESIZE" and view.flavor == params["flavor"]
            return view if ok else None

        view = self.wait(confirmed, f"server on flavor {params['flavor']}")
        flavor = self.backend.flavor(params["flavor"])
        Instance.objects.filter(pk=self.instance.pk).update(
            flavor=flavor.name, vcpus=flavor.vcpus, memory_mb=flavor.memory_mb, disk_gb=flavor.disk_gb
        )
        return {"flavor": flavor.name, "observed": view.evidence}

    def delete(self) -> dict[str, Any]:
        server = self.instance.server_id
        kept: list[str] = []
        if server:
            backend = self.backend
            kept = backend.volumes_to_keep(server)
            if kept and backend.stops_before_delete:
                self.stop_before_delete(server)
            backend.delete(server)
            crash_point("operation.called")

            def gone():
                view = backend.server(server)
                return True if view is None or view.status == S.DELETED else None

            self.wait(gone, f"server {server} gone")
            lost = backend.lost_volumes(server, kept)
            if lost:
                Instance.objects.filter(pk=self.instance.pk).update(deleted_at=timezone.now())
                raise OperationFailed(
                    f"the server {server} was deleted, but {', '.join(lost)} did not survive it: "
                    "the disk was lost with it, although the delete was asked to keep it",
                    kind="volume_lost",
                )
        if kept:
            volumes = f"kept: {', '.join(kept)} (checked after the server was gone)"
        elif self.operation.params.get("block_storage"):
            volumes = "kept: the server's volumes were not touched"
        else:
            volumes = (
                f"none to keep: the {self.connection.cloud_id} cloud has no block-storage service; "
                "the server's root disk was ephemeral and went with it"
            )
        Instance.objects.filter(pk=self.instance.pk).update(deleted_at=timezone.now())
        return {"server_id": server, "volumes": volumes, "kept": kept}

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
            self.backend.delete_image(snapshot.image_id)
            crash_point("operation.called")

            def gone():
                image = self.backend.image(snapshot.image_id)
                return True if image is None or image.status == "deleted" else None

            self.wait(gone, f"image {snapshot.image_id} gone")
        Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.DELETED, deleted_at=timezone.now())
        return {"image_id": snapshot.image_id}

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
        deadline = min(started + _deadline_seconds(), self.budget_ends)
        while True:
            found = check()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                last = f"; last seen {self.last_words}" if self.last_words else ""
                waited = deadline - started
                raise OperationFailed(f"not observed within {waited:.0f} s: {what}{last}", kind="timeout")
            time.sleep(_poll_interval())

    # ------------------------------------------------------------------ the end
    def finish(self, state: str, *, kind: str = "", message: str = "", result: dict | None = None) -> None:
        now = timezone.now()
        self.operation.error_kind = kind
        with transaction.atomic():
            Operation.objects.filter(pk=self.operation.pk).update(
                state=state,
                error_kind=kind,
                error_message=message[:4000],
                result=result or {},
                finished_at=now,
                updated_at=now,
            )
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
