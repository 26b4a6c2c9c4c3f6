"""Instances with volumes on the real development OpenStack (Nova + Cinder, deploy/dev/openstack): a connection
with `root_disk: volume` boots each server from a Cinder volume made from the image; a delete keeps it (even a
volume whose attachment says delete_on_termination), the kept volume holds volume quota, a reclaim is refused
while a server uses it and deletes it once none does; a purge deletes it after the server. Every claim is
checked again with the admin's own openstacksdk reads of Cinder.
"""

from __future__ import annotations

import pytest

from cloudpivot.accounts.models import AuditEntry, Quota
from resources.models import KeptVolume
from tests.resources.openstack_support import act, create, finished, running_on_a_volume

pytestmark = [pytest.mark.e2e]


def reclaim(api, volume_id, user="bob"):
    return api(user).post(f"/api/v1/volumes/{volume_id}/reclaim", format="json")


def test_a_kept_root_volume_holds_quota_and_is_reclaimed_only_once_no_server_uses_it(os_volumes, api, world):
    Quota.objects.create(project=world.alpha, max_volume_gb=1)
    conn = os_volumes.conn
    instance, volume = running_on_a_volume(api, os_volumes)

    operation = act(api, str(instance.pk), action="delete", volumes="keep")
    assert operation["result"]["kept"] == [volume.id]
    left = conn.compute.find_server(instance.server_id, ignore_missing=True)
    assert left is None or left.status == "DELETED"
    volume = conn.block_storage.get_volume(volume.id)
    assert volume.status == "available" and volume.attachments == []  # Cinder shows it free, and still there

    listed = api("rita").get("/api/v1/volumes").json()["results"]
    assert [(v["ref"], v["size_gb"], v["state"], v["instance"], v["cloud"]) for v in listed] == [
        (volume.id, 1, "kept", str(instance.pk), "os-dev")
    ]
    kept_id = listed[0]["id"]
    again = create(api, name="vm2")  # the kept 1 GB fills alpha's quota
    assert again.status_code == 422 and again.json()["message"].startswith("quota exceeded: volume GB 1/0 left")

    other = os_volumes.other_server(volume_id=volume.id)  # someone else's server now writes to it
    refused = reclaim(api, kept_id)
    assert refused.status_code == 409 and refused.json()["code"] == "volume_in_use", refused.json()
    assert refused.json()["message"] == (
        f"{volume.id} is still used by server {other.id}: a volume is reclaimed only once nothing writes to it; "
        "delete or change those first"
    )
    assert conn.block_storage.get_volume(volume.id).status == "in-use"

    conn.compute.delete_server(other)
    conn.compute.wait_for_delete(other, interval=1, wait=120)
    response = reclaim(api, kept_id)
    assert response.status_code == 202, response.json()
    done = finished(api, response.json()["id"])
    assert done["result"]["reclaimed"] == "deleted" and done["result"]["size_gb"] == 1
    assert conn.block_storage.find_volume(volume.id, ignore_missing=True) is None  # Cinder: gone
    assert AuditEntry.objects.get(action="resources:volume-reclaimed").details["ref"] == volume.id
    assert create(api, name="vm3").status_code == 202  # the GB are free again


def test_a_keep_holds_even_where_the_attachment_says_delete_on_termination(os_volumes, api):
    """A server made (or changed) elsewhere may say delete_on_termination: the delete sets it to false first."""
    conn = os_volumes.conn
    instance, volume = running_on_a_volume(api, os_volumes)
    os_volumes.cloud.conn.compute.put(
        f"/servers/{instance.server_id}/os-volume_attachments/{volume.id}",
        json={"volumeAttachment": {"volumeId": volume.id, "delete_on_termination": True}},
        microversion="2.85",
    ).raise_for_status()

    operation = act(api, str(instance.pk), action="delete", volumes="keep")

    assert operation["result"]["kept"] == [volume.id]
    assert conn.block_storage.get_volume(volume.id).status == "available"
    assert KeptVolume.objects.get().ref == volume.id


def test_a_purge_deletes_the_root_volume_after_the_server(os_volumes, api):
    conn = os_volumes.conn
    instance, volume = running_on_a_volume(api, os_volumes)
    operation = act(api, str(instance.pk), action="delete", volumes="purge")
    assert operation["result"]["purged"] == [volume.id] and operation["result"]["kept"] == []
    assert conn.block_storage.find_volume(volume.id, ignore_missing=True) is None
    assert not KeptVolume.objects.exists()


def test_an_image_booted_server_has_no_volume_to_keep_and_says_so(os_instances, api):
    operation = finished(api, create(api).json()["id"])
    deleted = act(api, operation["instance"], action="delete", volumes="keep")
    assert deleted["result"]["kept"] == []
    assert deleted["result"]["volumes"] == (
        "none to keep: the server had no volumes; its root disk was ephemeral and went with it"
    )
