"""What the tests of instances on the development OpenStack share: the instance API as they call it (`create`,
`act`, `finished`, `instance`), an instance running through the service or booted from a Cinder volume, and a
wait until Nova settles."""

from __future__ import annotations

from resources.models import Instance
from resources.services import instance_create
from tests import helpers
from tests.plugins.openstack import INSTALLATION


def body(**extra):
    """A create request; a None in `extra` leaves that field out."""
    document = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    return {key: value for key, value in (document | extra).items() if value is not None}


def create(api, user="bob", **extra):
    """POST /api/v1/instances by `user`: a cp.tiny `vm1` on os-dev in alpha unless `extra` says otherwise."""
    return api(user).post("/api/v1/instances", body(**extra), format="json")


def act(api, instance_id, **payload):
    """One action; jobs run inline at commit, so the Operation has finished when the answer comes."""
    response = api("bob").post(f"/api/v1/instances/{instance_id}/actions", payload, format="json")
    assert response.status_code == 202, response.json()
    return finished(api, response.json()["id"])


def finished(api, operation_id):
    """The Operation, which must have succeeded."""
    operation = api("bob").get(f"/api/v1/operations/{operation_id}").json()
    assert operation["state"] == "succeeded", (operation["action"], operation["error_kind"], operation["error_message"])
    assert operation["started_at"] and operation["finished_at"]
    return operation


def instance(api, instance_id):
    """The instance as a reader of its project sees it."""
    return api("rita").get(f"/api/v1/instances/{instance_id}").json()


def running_instance(os_instances) -> Instance:
    """A running `vm1` of bob's, created through the service (its job runs inline)."""
    operation, _ = instance_create(user=os_instances.world.bob, data=body())
    operation.refresh_from_db()
    assert operation.state == "succeeded", operation.error_message
    return Instance.objects.get(pk=operation.instance_id)


def running_on_a_volume(api, os_volumes, name="vm1"):
    """An instance booted from its Cinder root volume (os_volumes), checked in Cinder: (instance, volume)."""
    operation = finished(api, create(api, name=name).json()["id"])
    instance = Instance.objects.get(pk=operation["instance"])
    server = os_volumes.conn.compute.get_server(instance.server_id)
    (attached,) = server.attached_volumes
    assert operation["result"]["root_volume"] == instance.root_volume_ref == attached["id"]
    volume = os_volumes.conn.block_storage.get_volume(attached["id"])
    assert volume.status == "in-use" and volume.is_bootable and volume.size == 1  # cp.tiny's 1 GB disk
    assert [a["server_id"] for a in volume.attachments] == [server.id]
    assert volume.metadata["cloudpivot_instance"] == str(instance.pk)
    assert volume.metadata["cloudpivot_installation"] == INSTALLATION
    return instance, volume


def settle(os_instances, server_id: str, status: str) -> None:
    """Wait until Nova shows the server in `status` with no task under way."""

    def reached() -> bool:
        server = os_instances.conn.compute.get_server(server_id)
        return (server.status, server.task_state) == (status, None)

    helpers.wait_for(reached, timeout=60, what=f"Nova: {status}")
