"""Extra data volumes on the real development OpenStack (Nova + Cinder, deploy/dev/openstack): each one a blank
block device mapping of the create, which Nova has Cinder make and attaches to the server. A delete keeps them
(each a kept volume of its size, reclaimed like a root volume) or purges them. Checked with the admin's own
openstacksdk reads of Nova and Cinder.
"""

from __future__ import annotations

import pytest

from resources.models import Instance, KeptVolume
from tests.resources.openstack_support import act, create, finished

pytestmark = [pytest.mark.e2e]


def attached(conn, server_id: str) -> dict[str, object]:
    """The server's volumes as Cinder shows them, by id."""
    server = conn.compute.get_server(server_id)
    return {a["id"]: conn.block_storage.get_volume(a["id"]) for a in server.attached_volumes}


def test_an_image_booted_server_gets_its_data_volume_and_a_delete_keeps_it(os_instances, api):
    conn = os_instances.conn
    operation = finished(api, create(api, volumes=[{"size_gb": 2, "name": "data"}]).json()["id"])
    instance = Instance.objects.get(pk=operation["instance"])
    assert instance.volumes == [{"name": "data", "size_gb": 2}] and instance.root_volume_ref == ""
    (volume,) = attached(conn, instance.server_id).values()
    assert (volume.size, volume.status, volume.is_bootable) == (2, "in-use", False)
    assert [a["server_id"] for a in volume.attachments] == [instance.server_id]

    deleted = act(api, str(instance.pk), action="delete", volumes="keep")
    assert deleted["result"]["kept"] == [volume.id]
    volume = conn.block_storage.get_volume(volume.id)
    assert volume.status == "available" and volume.attachments == []  # Nova did not take it with the server
    listed = api("rita").get("/api/v1/volumes").json()["results"]
    assert [(v["ref"], v["size_gb"], v["state"], v["instance"]) for v in listed] == [
        (volume.id, 2, "kept", str(instance.pk))
    ]
    reclaim = api("bob").post(f"/api/v1/volumes/{listed[0]['id']}/reclaim", format="json")
    assert reclaim.status_code == 202, reclaim.json()
    assert finished(api, reclaim.json()["id"])["result"]["size_gb"] == 2
    assert conn.block_storage.find_volume(volume.id, ignore_missing=True) is None


def test_a_volume_booted_server_keeps_its_root_volume_apart_and_a_purge_deletes_both(os_volumes, api):
    conn = os_volumes.conn
    operation = finished(api, create(api, volumes=[{"size_gb": 2}]).json()["id"])
    instance = Instance.objects.get(pk=operation["instance"])
    volumes = attached(conn, instance.server_id)
    root = volumes[instance.root_volume_ref]  # the root volume is the one made from the image, not the data one
    assert operation["result"]["root_volume"] == root.id and (root.size, root.is_bootable) == (1, True)
    (data,) = [v for ref, v in volumes.items() if ref != root.id]
    assert (data.size, data.status, data.is_bootable) == (2, "in-use", False)

    deleted = act(api, str(instance.pk), action="delete", volumes="purge")
    assert sorted(deleted["result"]["purged"]) == sorted([root.id, data.id]) and deleted["result"]["kept"] == []
    for ref in (root.id, data.id):
        assert conn.block_storage.find_volume(ref, ignore_missing=True) is None
    assert not KeptVolume.objects.exists()
