"""KubeVirt instances: delete keeping volumes that cannot lose the disk, and a guest that stops itself.

Through the API, against the loopback API server (tests/clusters/kube_fixture.py), which plays KubeVirt's
VM controller re-adopting an unowned DataVolume its template names (until the VM is being deleted), the
garbage collector (Orphan keeps dependents, Background deletes what the VM still owns) and the VM
controller's reaction to a guest shutdown per runStrategy (Always boots again; RerunOnFailure does not).
"""

from __future__ import annotations

from resources.models import Instance, Operation
from resources.services import instances_refresh
from tests.clusters.kube_api import DATA_VOLUMES, VMIS
from tests.helpers import wait_for
from tests.resources.kubevirt_world import (
    NS,
    Worker,
    accepted,
    act,
    create_running,
    operation,
    still_running,
    succeeded,
)


def stop_through_cloudpivot(api, kv, instance_id, name) -> None:
    """A stop asked through the API, KubeVirt playing its part: the VM Halted, then Stopped."""
    stop = Worker(accepted(act(api, instance_id, "stop")))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "Halted", what="runStrategy Halted")
    kv.vm_stopped(name)
    succeeded(stop)


def test_delete_keeping_volumes_stops_the_vm_before_it_deletes_it_with_orphan_propagation(kv, api):
    instance_id, name = create_running(api, kv)
    delete = Worker(accepted(act(api, instance_id, "delete", volumes="keep")))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "Halted", what="runStrategy Halted")
    still_running(delete.operation_id)  # the VM still runs: its disk is still written, nothing is deleted
    assert Instance.objects.get(pk=instance_id).desired_power_state == "stopped"  # not the guest's stop
    assert not kv.vm(name)["metadata"].get("deletionTimestamp") and kv.vm_delete_policies() == []
    kv.vm_stopped(name)
    wait_for(lambda: kv.vm(name)["metadata"].get("deletionTimestamp"), what="the VM to be deleted")
    assert kv.vm_delete_policies() == [(name, "Orphan")]
    assert not kv.objects(DATA_VOLUMES)[f"{name}-root"]["metadata"].get("ownerReferences")
    still_running(delete.operation_id)  # KubeVirt's finalizer holds the VM
    kv.vm_deletion_finished(name)
    op = succeeded(delete)
    assert f"{name}-root" in kv.objects(DATA_VOLUMES)
    assert op.result["kept"] == [f"datavolume/{name}-root"]
    shown = api("bob").get(f"/api/v1/instances/{instance_id}").json()
    assert (shown["status"], shown["status_reason"]) == ("Deleted", "deleted")


def test_a_data_volume_lost_during_the_delete_fails_it_as_volume_lost_and_the_instance_is_deleted(kv, api):
    instance_id, name = create_running(api, kv)
    stop_through_cloudpivot(api, kv, instance_id, name)
    delete = Worker(accepted(act(api, instance_id, "delete", volumes="keep")))
    wait_for(lambda: kv.vm(name)["metadata"].get("deletionTimestamp"), what="the VM to be deleted")
    path = f"/apis/cdi.kubevirt.io/v1beta1/namespaces/{NS}/datavolumes/{name}-root"
    kv.call(lambda: kv.api.system("DELETE", path))  # someone (or something) deleted the disk meanwhile
    kv.vm_deletion_finished(name)
    assert delete.join().startswith("failed")
    op = operation(delete.operation_id)
    assert op.error_kind == "volume_lost", op.error_message
    assert f"datavolume/{name}-root did not survive" in op.error_message
    shown = api("bob").get(f"/api/v1/instances/{instance_id}").json()
    assert shown["status"] == "Deleted" and shown["operation"] is None
    assert shown["status_reason"].startswith("deleted, but a kept volume was lost")
    assert Instance.objects.get(pk=instance_id).deleted_at is not None
    listed = api("bob").get(f"/api/v1/operations/{delete.operation_id}").json()
    assert (listed["state"], listed["error_kind"]) == ("failed", "volume_lost")


def test_a_guest_that_shuts_itself_down_stays_stopped_and_starts_again_only_with_a_new_boot_id(kv, api):
    instance_id, name = create_running(api, kv)
    assert kv.vm(name)["spec"]["runStrategy"] == "RerunOnFailure"
    kv.guest_shutdown(name)
    assert kv.objects(VMIS)[name]["status"]["phase"] == "Succeeded"  # RerunOnFailure: KubeVirt left it off

    assert instances_refresh() == "observed 1 instances, 1 changed"
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.status, instance.desired_power_state, instance.boot_id) == ("Stopped", "stopped", 1)
    assert instance.status_reason.startswith("the guest stopped itself (KubeVirt: Stopped")
    assert kv.vm(name)["spec"]["runStrategy"] == "Halted"  # the VM's own desired state is stopped too
    event = Operation.objects.get(instance_id=instance_id, action="stop")
    assert (event.requested_by, event.params, event.state) == (None, {"by": "guest"}, "succeeded")
    assert event.result["event"] == "the guest stopped itself"
    kv.vm_stopped(name)  # the VM controller removes the Succeeded VMI under Halted
    instances_refresh()
    instances_refresh()
    assert Operation.objects.filter(instance_id=instance_id, action="stop").count() == 1  # one event, once
    assert Instance.objects.get(pk=instance_id).status == "Stopped"

    replay = act(api, instance_id, "start", boot_id=1)  # the boot that already happened: nothing boots
    assert replay.status_code in (200, 202) and replay.json()["action"] == "create", replay.json()
    assert kv.vm(name)["spec"]["runStrategy"] == "Halted"
    start = Worker(accepted(act(api, instance_id, "start", boot_id=2)))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "RerunOnFailure", what="runStrategy RerunOnFailure")
    still_running(start.operation_id)
    kv.vm_running(name)
    succeeded(start)
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.status, instance.desired_power_state, instance.boot_id) == ("Running", "running", 2)


def test_the_instance_page_shows_that_the_guest_stopped_itself(kv, api, client, world):
    instance_id, name = create_running(api, kv)
    kv.guest_shutdown(name)
    instances_refresh()
    client.force_login(world.bob)
    page = client.get(f"/instances/{instance_id}/").content.decode()
    assert "the guest stopped itself" in page
    assert "stop</span>" in page and "succeeded · guest · the guest stopped itself" in page


def test_a_vm_stopped_by_cloudpivot_is_not_taken_for_a_guest_shutdown(kv, api):
    instance_id, name = create_running(api, kv)
    stop_through_cloudpivot(api, kv, instance_id, name)
    assert instances_refresh() == "observed 1 instances, 0 changed"
    assert not Operation.objects.filter(instance_id=instance_id, params__by="guest").exists()
