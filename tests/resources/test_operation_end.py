"""How Operations end when things go wrong: internal errors, dead workers, lost enqueues, lock hand-over."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.utils import timezone

from cloudpivot.accounts.models import AuditEntry
from resources import jobs
from resources.models import Instance, Operation
from resources.services import instance_create
from resources.services.run import operation_run
from resources.services.timing import operation_lost_after_seconds
from tests.builders import snapshot_row

pytestmark = pytest.mark.e2e

CREATE = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}


def test_an_unexpected_error_shows_users_a_reference_and_logs_the_details(os_world, caplog):
    operation, _ = instance_create(user=os_world.world.bob, data=CREATE)
    # a create Operation whose parameters lost the flavor id: the runner fails with a KeyError, a bug of ours
    Operation.objects.filter(pk=operation.pk).update(params={"image": "secret-internal-words"})
    with caplog.at_level(logging.ERROR, logger="resources.services.run"):
        operation_run(operation_id=str(operation.pk))
    operation.refresh_from_db()
    assert operation.state == "failed" and operation.error_kind == "internal"
    assert operation.error_message == (f"internal error (reference {operation.pk}); the details are in the server log")
    record = next(r for r in caplog.records if str(operation.pk) in r.getMessage())
    assert record.exc_info and record.exc_info[0] is KeyError


def test_an_operation_job_times_out_after_its_budget_and_before_the_broker_retries(settings):
    from resources.services.timing import operation_budget_seconds, operation_job_timeout, operation_lost_after_seconds

    assert operation_budget_seconds() < operation_job_timeout() < settings.Q_CLUSTER["retry"]
    assert operation_lost_after_seconds() > operation_job_timeout()
    settings.INSTANCE_OPERATION_BUDGET_SECONDS = 3600  # too long: the timeout still stays below retry
    assert operation_job_timeout() == settings.Q_CLUSTER["retry"] - 10


def running_instance(os_instances):
    """A real server on the dev OpenStack, made through the create Operation (run inline)."""
    operation, _ = instance_create(user=os_instances.world.bob, data=CREATE)
    operation.refresh_from_db()
    assert operation.state == "succeeded", operation.error_message
    instance = Instance.objects.get(pk=operation.instance_id)
    assert instance.status == "Running" and instance.operation_id is None
    return instance


def left_open(instance, state, **times):
    """An Operation as a killed worker (running) or a lost enqueue (pending) leaves it."""
    operation = Operation.objects.create(
        project=instance.project, instance=instance, action="stop", requested_by=instance.owner, state=state
    )
    Operation.objects.filter(pk=operation.pk).update(**times)
    Instance.objects.filter(pk=instance.pk).update(operation=operation, desired_power_state="stopped")
    return operation


def test_a_running_operation_whose_worker_died_is_failed_as_lost_and_the_instance_acts_again(os_instances, api):
    instance = running_instance(os_instances)
    old = timezone.now() - dt.timedelta(seconds=operation_lost_after_seconds() + 5)
    recent = timezone.now() - dt.timedelta(seconds=operation_lost_after_seconds() - 30)
    stuck = left_open(instance, "running", started_at=old)
    url = f"/api/v1/instances/{instance.pk}/actions"
    refused = api("bob").post(url, {"action": "stop"}, format="json")
    assert refused.status_code == 409 and "in flight" in refused.json()["message"]
    Operation.objects.filter(pk=stuck.pk).update(started_at=recent)
    jobs.refresh()  # still within its job's time: left alone
    assert Operation.objects.get(pk=stuck.pk).state == "running"
    Operation.objects.filter(pk=stuck.pk).update(started_at=old)
    Instance.objects.filter(pk=instance.pk).update(status="Unknown", observed_at=None)

    jobs.refresh()

    stuck.refresh_from_db()
    assert (stuck.state, stuck.error_kind) == ("failed", "lost")
    assert stuck.error_message.startswith("lost: the worker stopped before the post-condition was seen")
    assert stuck.finished_at is not None
    instance.refresh_from_db()
    assert instance.operation_id is None and instance.status == "Running" and instance.observed_at
    assert AuditEntry.objects.filter(action="resources:operation-lost", object_ref=str(stuck.pk)).exists()
    response = api("bob").post(url, {"action": "stop"}, format="json")
    assert response.status_code == 202, response.json()
    assert Operation.objects.get(pk=response.json()["id"]).state == "succeeded"
    assert Instance.objects.get(pk=instance.pk).status == "Stopped"


def test_a_pending_operation_whose_enqueue_was_lost_is_enqueued_again_and_runs(os_instances):
    instance = running_instance(os_instances)
    fresh = left_open(instance, "pending")
    jobs.refresh()  # just asked for: its job may still come
    assert Operation.objects.get(pk=fresh.pk).state == "pending"
    Operation.objects.filter(pk=fresh.pk).update(updated_at=timezone.now() - dt.timedelta(minutes=3))

    jobs.refresh()  # the jobs run inline (SYNC): the re-enqueued stop runs now

    fresh.refresh_from_db()
    assert fresh.state == "succeeded", fresh.error_message
    assert Instance.objects.get(pk=instance.pk).status == "Stopped"
    assert jobs.run_operation(str(fresh.pk)) == "nothing to do"  # a second delivery changes nothing
    Operation.objects.filter(pk=fresh.pk).update(state="running")
    assert jobs.run_operation(str(fresh.pk)) == "nothing to do"  # another job has it


def test_a_finished_snapshot_delete_leaves_another_operations_lock_on_the_instance(os_world, api):
    from resources.models import Snapshot
    from resources.services import snapshot_delete

    world = os_world.world
    operation, _ = instance_create(user=world.bob, data=CREATE)  # pending: it holds the instance
    instance = Instance.objects.get(pk=operation.instance_id)
    # no image: the delete has nothing to ask the cloud
    snapshot = snapshot_row(
        connection=os_world.connection, project=world.alpha, owner=world.bob, name="old", instance=instance
    )
    deleting, _ = snapshot_delete(user=world.bob, snapshot=snapshot)
    assert operation_run(operation_id=str(deleting.pk)) == "succeeded"
    assert Snapshot.objects.get(pk=snapshot.pk).status == "deleted"
    assert Instance.objects.get(pk=instance.pk).operation_id == operation.pk
    Instance.objects.filter(pk=instance.pk).update(status="Running", server_id="s-1")
    response = api("bob").post(f"/api/v1/instances/{instance.pk}/actions", {"action": "stop"}, format="json")
    assert response.status_code == 409 and "in flight" in response.json()["message"]
