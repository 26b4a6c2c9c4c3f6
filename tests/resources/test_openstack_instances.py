"""Instances on the real development OpenStack: every action through the API, each one an Operation that
succeeds only when the post-condition was observed, checked again here with the admin's own SDK reads.

The fake virt driver does every action at once and uploads no snapshot bytes (snapshot_filler does that).
"""

from __future__ import annotations

import pytest

from cloudpivot.accounts.models import AuditEntry, Quota
from resources.models import Instance, Operation, Snapshot
from resources.services import instances_refresh
from tests import helpers
from tests.plugins.openstack import INSTALLATION
from tests.resources.openstack_support import act, create, finished, instance

pytestmark = [pytest.mark.e2e]


def nova(os_instances, server_id):
    server = os_instances.conn.compute.get_server(server_id)
    return server.status, server.task_state


def test_an_instance_lives_through_every_action_with_a_succeeded_operation_each(os_instances, api, snapshot_filler):
    response = create(api)
    assert response.status_code == 202, response.json()
    operation = finished(api, response.json()["id"])
    instance_id = operation["instance"]
    vm = instance(api, instance_id)
    assert vm["status"] == "Running" and vm["operation"] is None
    server_id = vm["server_id"]
    assert operation["result"]["server_id"] == server_id
    server = os_instances.conn.compute.get_server(server_id)
    assert (server.status, server.task_state) == ("ACTIVE", None)
    assert f"cloudpivot-{INSTALLATION}" in server.tags and f"cpi-{instance_id.replace('-', '')}" in server.tags
    assert (
        server.metadata["cloudpivot_instance"] == instance_id and server.metadata["cloudpivot_instance_name"] == "vm1"
    )

    steps = [
        ({"action": "stop"}, "Stopped", "SHUTOFF"),
        ({"action": "start"}, "Running", "ACTIVE"),
        ({"action": "reboot", "type": "soft"}, "Running", "ACTIVE"),
        ({"action": "reboot", "type": "hard"}, "Running", "ACTIVE"),
        ({"action": "pause"}, "Paused", "PAUSED"),
        ({"action": "unpause"}, "Running", "ACTIVE"),
        ({"action": "suspend"}, "Suspended", "SUSPENDED"),
        ({"action": "resume"}, "Running", "ACTIVE"),
    ]
    for payload, status, nova_status in steps:
        operation = act(api, instance_id, **payload)
        assert operation["action"] == payload["action"]
        assert operation["result"]["observed"]["server_status"] == nova_status
        assert instance(api, instance_id)["status"] == status, payload
        assert nova(os_instances, server_id) == (nova_status, None), payload
    assert Instance.objects.get(pk=instance_id).boot_id == 2  # the one explicit start

    # snapshot: the image is active (bytes filled in as a real driver would) before the Operation succeeds
    operation = act(api, instance_id, action="snapshot", name="vm1-snap")
    snapshot = api("rita").get(f"/api/v1/snapshots/{operation['snapshot']}").json()
    assert snapshot["status"] == "available" and snapshot["project"] == "alpha"
    assert snapshot["image_id"] in snapshot_filler.filled and not snapshot_filler.errors
    image = os_instances.conn.image.get_image(snapshot["image_id"])
    assert image.status == "active" and snapshot["size_bytes"] == image.size > 0
    assert nova(os_instances, server_id) == ("ACTIVE", None)

    # restore: rebuild the same server from the snapshot image
    operation = act(api, instance_id, action="restore", snapshot=snapshot["id"])
    server = os_instances.conn.compute.get_server(server_id)
    assert server.image["id"] == snapshot["image_id"] and (server.status, server.task_state) == ("ACTIVE", None)
    assert instance(api, instance_id)["image"] == snapshot["image_id"]

    # a new instance from the snapshot
    response = api("bob").post(
        f"/api/v1/snapshots/{snapshot['id']}/restore", {"name": "vm1-copy", "flavor": "cp.tiny"}, format="json"
    )
    assert response.status_code == 202, response.json()
    copy = finished(api, response.json()["id"])
    copy_vm = instance(api, copy["instance"])
    assert copy_vm["status"] == "Running" and copy_vm["project"] == "alpha"
    assert os_instances.conn.compute.get_server(copy_vm["server_id"]).image["id"] == snapshot["image_id"]

    console = api("rita").get(f"/api/v1/instances/{instance_id}/console").json()
    assert "FAKE CONSOLE OUTPUT" in console.get("output", ""), console

    # delete, keeping volumes: the server booted from the image has none, and the Operation says so
    operation = act(api, instance_id, action="delete", volumes="keep")
    assert operation["result"]["volumes"].startswith("none to keep: the server had no volumes")
    assert instance(api, instance_id)["status"] == "Deleted"
    gone = os_instances.conn.compute.find_server(server_id, ignore_missing=True)
    assert gone is None or gone.status == "DELETED"  # Nova shows DELETED for a moment, then nothing

    history = [op["action"] for op in api("rita").get(f"/api/v1/instances/{instance_id}/operations").json()]
    assert history[::-1] == [
        "create",
        "stop",
        "start",
        "reboot",
        "reboot",
        "pause",
        "unpause",
        "suspend",
        "resume",
        "snapshot",
        "restore",
        "delete",
    ]
    assert set(Operation.objects.filter(instance_id=instance_id).values_list("state", flat=True)) == {"succeeded"}
    # the snapshot outlives the instance; deleting it removes the image
    response = api("bob").delete(f"/api/v1/snapshots/{snapshot['id']}")
    assert response.status_code == 202
    finished(api, response.json()["id"])
    assert Snapshot.objects.get(pk=snapshot["id"]).status == "deleted"


def test_a_second_create_over_the_instance_quota_is_refused_with_the_limit_named(os_instances, api):
    Quota.objects.create(project=os_instances.world.alpha, connection=os_instances.connection, max_instances=1)
    first = finished(api, create(api).json()["id"])
    response = create(api, name="vm2")
    assert response.status_code == 422
    assert response.json()["message"].startswith("quota exceeded: instances 1/0 left"), response.json()
    assert "on os-dev allows 1" in response.json()["message"]
    assert [s.id for s in os_instances.conn.compute.servers(tags=f"cpi-{first['instance'].replace('-', '')}")]
    assert Instance.objects.count() == 1


def test_a_server_deleted_behind_our_back_shows_unknown_with_evidence(os_instances, api):
    operation = finished(api, create(api).json()["id"])
    vm = instance(api, operation["instance"])
    # Fetched before the delete: a fast delete leaves nothing to fetch after it
    server = os_instances.conn.compute.get_server(vm["server_id"])
    os_instances.conn.compute.delete_server(server)
    os_instances.conn.compute.wait_for_delete(server, wait=60)
    assert "changed" in instances_refresh()
    vm = instance(api, operation["instance"])
    assert vm["status"] == "Unknown"
    assert vm["status_reason"].startswith(f"server {vm['server_id']} not found in the cloud at ")
    entry = AuditEntry.objects.get(action="resources:instance-unknown")
    assert entry.via == "system" and entry.object_ref == operation["instance"]
    # Deleting it still works (the server is already gone) and the Operation says what it found
    final = act(api, operation["instance"], action="delete", volumes="keep")
    assert final["state"] == "succeeded" and instance(api, operation["instance"])["status"] == "Deleted"


def test_a_snapshot_over_the_count_limit_prunes_the_oldest_and_audits_it(os_instances, api, snapshot_filler):
    Quota.objects.create(project=os_instances.world.alpha, max_snapshots=1)
    instance_id = finished(api, create(api).json()["id"])["instance"]
    first = act(api, instance_id, action="snapshot", name="s1")
    second = act(api, instance_id, action="snapshot", name="s2")
    assert second["result"]["pruned"] == [first["snapshot"]]
    assert Snapshot.objects.get(pk=first["snapshot"]).status == "deleted"
    assert Snapshot.objects.get(pk=second["snapshot"]).status == "available"
    entry = AuditEntry.objects.get(action="resources:snapshot-pruned")
    assert entry.object_ref == first["snapshot"] and "over the limit of 1" in entry.details["why"]
    assert os_instances.conn.image.find_image(first["result"]["image_id"], ignore_missing=True) is None


def test_a_resize_is_checked_against_quota_happens_on_the_one_host_and_one_nova_gives_up_on_fails(os_instances, api):
    quota = Quota.objects.create(project=os_instances.world.alpha, max_volume_gb=10)
    instance_id = finished(api, create(api).json()["id"])["instance"]
    server_id = instance(api, instance_id)["server_id"]
    url = f"/api/v1/instances/{instance_id}/actions"
    response = api("bob").post(url, {"action": "resize", "flavor": "cp.nohost"}, format="json")
    assert response.status_code == 422, response.json()
    assert response.json()["message"].startswith("quota exceeded: volume GB 4999999/9 left"), response.json()
    quota.delete()
    # No host has that much disk: Nova accepts the resize, then the scheduler gives up and the server settles
    # on its old flavor. The Operation says so.
    response = api("bob").post(url, {"action": "resize", "flavor": "cp.nohost"}, format="json")
    assert response.status_code == 202
    operation = api("bob").get(f"/api/v1/operations/{response.json()['id']}").json()
    assert operation["state"] == "failed" and operation["error_kind"] == "failed"
    assert operation["error_message"].startswith("the resize did not happen: the server is ACTIVE on flavor cp.tiny")
    assert "Nova's resize action ended in Error" in operation["error_message"]
    vm = instance(api, instance_id)
    assert (vm["flavor"], vm["status"], vm["operation"]) == ("cp.tiny", "Running", None)

    # The dev cloud allows resizing on the same host (its only one): the resize and its confirm really happen.
    operation = act(api, instance_id, action="resize", flavor="cp.small")
    assert operation["result"]["flavor"] == "cp.small"
    vm = instance(api, instance_id)
    assert (vm["flavor"], vm["memory_mb"], vm["status"]) == ("cp.small", 128, "Running")
    conn = os_instances.conn
    server = conn.compute.get_server(server_id)
    assert (server.status, server.task_state, server.flavor["original_name"]) == ("ACTIVE", None, "cp.small")
    actions = {a.action: a.message for a in conn.compute.server_actions(server_id)}
    assert "resize" in actions and "confirmResize" in actions and actions["confirmResize"] != "Error", actions
    migrations = [m for m in conn.compute.migrations(instance_uuid=server_id) if m.status == "confirmed"]
    assert len(migrations) == 1 and migrations[0].migration_type == "resize", migrations
    assert migrations[0].source_compute == migrations[0].dest_compute == "fake-compute-1"


def test_a_server_found_shutoff_that_cloudpivot_did_not_stop_stays_stopped_until_a_new_boot_id(os_instances, api):
    """Nova's fake driver has no guest to power itself off: the admin's os-stop outside CloudPivot is the same
    observation for CloudPivot (SHUTOFF, never asked for), and Nova cannot tell the two apart either."""
    operation = finished(api, create(api).json()["id"])
    instance_id = operation["instance"]
    vm = instance(api, instance_id)
    os_instances.conn.compute.stop_server(vm["server_id"])
    helpers.wait_for(lambda: nova(os_instances, vm["server_id"]) == ("SHUTOFF", None), timeout=60, what="SHUTOFF")
    assert "1 changed" in instances_refresh()
    vm = instance(api, instance_id)
    assert (vm["status"], vm["desired_power_state"], vm["boot_id"]) == ("Stopped", "stopped", 1)
    assert vm["status_reason"].startswith(
        "the guest stopped itself, or it was stopped outside CloudPivot (Nova: SHUTOFF), not CloudPivot"
    )
    entry = AuditEntry.objects.get(action="resources:instance-guest-stopped")
    assert entry.details["was"] == "Running" and entry.details["now"] == "Stopped"
    events = api("bob").get(f"/api/v1/instances/{instance_id}/operations").json()
    rows = events["results"] if isinstance(events, dict) else events
    assert [(r["action"], r["state"], r["result"].get("event")) for r in rows][0] == (
        "stop",
        "succeeded",
        "the guest stopped itself, or it was stopped outside CloudPivot",
    )
    assert "0 changed" in instances_refresh()  # nothing new: no second entry
    assert AuditEntry.objects.filter(action="resources:instance-guest-stopped").count() == 1
    assert nova(os_instances, vm["server_id"]) == ("SHUTOFF", None)  # nothing booted it behind anyone's back

    replay = api("bob").post(
        f"/api/v1/instances/{instance_id}/actions", {"action": "start", "boot_id": 1}, format="json"
    )
    assert replay.json()["action"] == "create" and nova(os_instances, vm["server_id"]) == ("SHUTOFF", None)
    operation = act(api, instance_id, action="start", boot_id=2)
    assert operation["result"]["observed"]["server_status"] == "ACTIVE"
    vm = instance(api, instance_id)
    assert (vm["status"], vm["desired_power_state"], vm["boot_id"]) == ("Running", "running", 2)
