"""Resuming an Operation whose worker died (docs/crash-points.md, `operation.called`), against the real
development OpenStack: the lease tells a dead worker from a slow one, and the resumed job reads the cloud
before it asks again. Nova's own instance-action list counts what was asked.

The crash itself (a real qcluster SIGKILLed) is in tests/e2e/test_crash_points.py; here the row is left as
a killed worker leaves it, to reach the cases a crash point cannot choose between (the call noted or not).
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.utils import timezone

from resources import jobs
from resources.models import Instance, Operation
from resources.services.lease import Lease
from tests import helpers
from tests.builders import left_by_a_dead_worker
from tests.resources.openstack_support import running_instance, settle

pytestmark = pytest.mark.e2e


def nova_actions(os_instances, server_id: str, action: str) -> int:
    return sum(1 for a in os_instances.conn.compute.server_actions(server_id) if a.action == action)


def test_an_operation_under_a_live_lease_is_left_alone_however_old_it_is(os_instances):
    """A worker slow in a cloud call keeps renewing its lease: neither the reaper nor a second delivery of
    the job takes its Operation, even past the job timeout that used to mark it lost."""
    instance = running_instance(os_instances)
    operation = left_by_a_dead_worker(instance, "stop", called=True)
    Operation.objects.filter(pk=operation.pk).update(
        started_at=timezone.now() - dt.timedelta(hours=1), lease_until=timezone.now() + dt.timedelta(seconds=30)
    )
    jobs.refresh()
    assert jobs.run_operation(str(operation.pk)) == "nothing to do"
    operation.refresh_from_db()
    assert (operation.state, operation.resumes, operation.claimed_by) == ("running", 0, "elsewhere:1:dead")
    assert nova_actions(os_instances, instance.server_id, "stop") == 0


def test_a_stop_whose_server_is_already_shutoff_is_resumed_without_asking_again(os_instances):
    """The worker died after Nova accepted the stop and before it noted the call: the cloud is read first."""
    instance = running_instance(os_instances)
    os_instances.conn.compute.stop_server(instance.server_id)
    settle(os_instances, instance.server_id, "SHUTOFF")
    operation = left_by_a_dead_worker(instance, "stop", called=False)

    jobs.refresh()  # the reaper enqueues it; the job runs inline (SYNC) and resumes it

    operation.refresh_from_db()
    assert operation.state == "succeeded", operation.error_message
    assert (operation.resumes, operation.result["resumed"]) == (1, 1)
    assert nova_actions(os_instances, instance.server_id, "stop") == 1  # a second one would be Nova's 409
    instance.refresh_from_db()
    assert (instance.status, instance.operation_id) == ("Stopped", None)


def test_a_start_not_done_yet_is_asked_again_on_resume(os_instances):
    """The worker died before its call reached Nova: the server is still SHUTOFF, so the resume asks."""
    instance = running_instance(os_instances)
    os_instances.conn.compute.stop_server(instance.server_id)
    settle(os_instances, instance.server_id, "SHUTOFF")
    Instance.objects.filter(pk=instance.pk).update(status="Stopped")
    operation = left_by_a_dead_worker(instance, "start", called=False)

    jobs.refresh()

    operation.refresh_from_db()
    assert operation.state == "succeeded", operation.error_message
    assert nova_actions(os_instances, instance.server_id, "start") == 1
    assert Instance.objects.get(pk=instance.pk).status == "Running"


def test_a_reboot_whose_call_was_noted_is_resumed_without_a_second_reboot(os_instances):
    """A reboot leaves no state to read: the note of the accepted call (`called_at`) keeps the resume from
    rebooting the guest twice."""
    instance = running_instance(os_instances)
    os_instances.conn.compute.reboot_server(instance.server_id, "SOFT")
    settle(os_instances, instance.server_id, "ACTIVE")
    operation = left_by_a_dead_worker(instance, "reboot", called=True, type="soft")

    jobs.refresh()

    operation.refresh_from_db()
    assert operation.state == "succeeded", operation.error_message
    assert nova_actions(os_instances, instance.server_id, "reboot") == 1


def test_an_operation_resumed_as_often_as_allowed_is_failed_as_lost(os_instances, settings):
    settings.INSTANCE_OPERATION_MAX_RESUMES = 2
    instance = running_instance(os_instances)
    operation = left_by_a_dead_worker(instance, "stop", called=True, resumes=2)

    jobs.refresh()

    operation.refresh_from_db()
    assert (operation.state, operation.error_kind) == ("failed", "lost")
    assert "resumed 2 times" in operation.error_message
    instance.refresh_from_db()
    assert (instance.operation_id, instance.status) == (None, "Running")  # released, and observed again
    assert nova_actions(os_instances, instance.server_id, "stop") == 0


@pytest.mark.django_db(transaction=True)
def test_the_lease_is_renewed_while_its_worker_lives_and_lost_once_another_holds_it(world, settings):
    settings.INSTANCE_OPERATION_LEASE_SECONDS = 0.3
    first = timezone.now()
    operation = Operation.objects.create(
        project=world.alpha, action="stop", state="running", claimed_by="me", lease_until=first
    )
    lease = Lease(str(operation.pk), "me").start()
    try:
        helpers.wait_for(
            lambda: Operation.objects.get(pk=operation.pk).lease_until > first + dt.timedelta(seconds=0.25),
            timeout=10,
            what="the lease renewed",
        )
        assert not lease.lost
        Operation.objects.filter(pk=operation.pk).update(claimed_by="another")  # resumed elsewhere
        helpers.wait_for(lambda: lease.lost, timeout=10, what="the lease seen lost")
    finally:
        lease.stop()
    assert not lease.renewing
    renewed = Operation.objects.get(pk=operation.pk).lease_until
    time.sleep(0.3)
    assert Operation.objects.get(pk=operation.pk).lease_until == renewed  # a stopped lease is not renewed
