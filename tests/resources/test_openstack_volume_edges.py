"""The edges of `root_disk: volume` on the real development OpenStack (Nova + Cinder):

- a snapshot of a volume-booted instance is Nova's createImage of a volume-backed server: a Glance image holding
  no bytes that names a Cinder snapshot of the root volume. It becomes a CloudPivot snapshot once Cinder shows
  that snapshot available (its size is the snapshot's), a new instance boots from it (Nova makes its root volume
  from the Cinder snapshot), a restore in place is refused (422, naming what to do instead), the volume it was
  taken of is not reclaimed while the Cinder snapshot exists (409), and deleting the snapshot deletes both;
- a flavor with a 0 GB disk still holds the root volume's GB of the project's volume quota;
- `root_disk: volume` on a cloud whose catalog has no block storage is refused up front (400 naming root_disk),
  and check_cloud says Cinder is then needed. That cloud is the development OpenStack seen through a Keystone
  stand-in whose token catalog lacks Cinder (tests/plugins/openstack.py, cloud_without).

Every claim is checked again with the admin's own openstacksdk reads.
"""

from __future__ import annotations

import io
import json
import time
import uuid

import pytest
from django.core.management import CommandError, call_command

from cloudpivot.accounts.models import Quota
from clusters.backends.openstack.client import BLOCK_STORAGE_TYPES
from clusters.models import CloudConnection
from resources.models import Instance, KeptVolume, Operation, Snapshot
from tests.resources.test_openstack_instances import act, create, finished
from tests.resources.test_openstack_volumes import os_volumes, running_on_a_volume  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e]
GiB = 1024**3


def until(find, what: str, seconds: float = 120):
    """Fresh reads until `find` answers something true (a fast change may be done before the first look)."""
    deadline = time.monotonic() + seconds
    while not (found := find()):
        assert time.monotonic() < deadline, f"{what}: not seen after {seconds} s"
        time.sleep(0.5)
    return found


def cinder_snapshots_of(image) -> list[str]:
    mappings = image.properties["block_device_mapping"]
    mappings = json.loads(mappings) if isinstance(mappings, str) else mappings
    return [m["snapshot_id"] for m in mappings if m.get("snapshot_id")]


@pytest.fixture
def left_over(os_volumes):  # noqa: F811 - the imported fixture
    """Images and Cinder snapshots a failed test leaves: deleted at the end (before the fixture's volumes)."""
    conn, made = os_volumes.conn, {"images": [], "snapshots": []}
    yield made
    for image in made["images"]:
        conn.image.delete_image(image, ignore_missing=True)
    for ref in made["snapshots"]:
        conn.block_storage.delete_snapshot(ref, ignore_missing=True)
        until(lambda ref=ref: conn.block_storage.find_snapshot(ref, ignore_missing=True) is None, f"{ref} gone")


def test_a_snapshot_of_a_volume_booted_instance_launches_new_instances_and_is_not_restored_in_place(
    os_volumes,  # noqa: F811 - the imported fixture
    api,
    left_over,
):
    conn = os_volumes.conn
    instance, volume = running_on_a_volume(api, os_volumes)

    operation = act(api, str(instance.pk), action="snapshot", name="vm1-snap")
    snapshot = api("rita").get(f"/api/v1/snapshots/{operation['snapshot']}").json()
    left_over["images"].append(snapshot["image_id"])
    image = conn.image.get_image(snapshot["image_id"])
    (cinder_id,) = cinder_snapshots_of(image)
    left_over["snapshots"].append(cinder_id)
    cinder = conn.block_storage.get_snapshot(cinder_id)
    assert image.status == "active" and not image.size  # Glance holds no bytes: the disk is in Cinder
    assert image.properties["cloudpivot_snapshot"] == snapshot["id"]
    assert (cinder.volume_id, cinder.status, cinder.size) == (volume.id, "available", 1)
    assert snapshot["status"] == "available" and snapshot["size_bytes"] == 1 * GiB  # the Cinder snapshot's size
    assert operation["result"]["size_bytes"] == 1 * GiB

    # a restore in place is refused before any Operation, saying why and what to do instead
    before = Operation.objects.count()
    refused = api("bob").post(
        f"/api/v1/instances/{instance.pk}/actions", {"action": "restore", "snapshot": snapshot["id"]}, format="json"
    )
    body = refused.json()
    assert refused.status_code == 422 and body["code"] == "unsupported", body
    assert body["errors"][0]["field"] == "snapshot"
    assert f"instance vm1 boots from Cinder volume {volume.id}" in body["message"]
    assert "create a new instance from the snapshot instead" in body["message"]
    assert Operation.objects.count() == before

    # a new instance from it: Nova makes its root volume from the Cinder snapshot
    response = api("bob").post(
        f"/api/v1/snapshots/{snapshot['id']}/restore", {"name": "vm1-copy", "flavor": "cp.tiny"}, format="json"
    )
    assert response.status_code == 202, response.json()
    copy = Instance.objects.get(pk=finished(api, response.json()["id"])["instance"])
    server = conn.compute.get_server(copy.server_id)
    (attached,) = server.attached_volumes
    root = conn.block_storage.get_volume(attached["id"])
    assert root.id != volume.id and root.snapshot_id == cinder_id and root.status == "in-use"
    assert copy.root_volume_ref == root.id and copy.disk_gb == root.size == 1 and copy.status == "Running"
    assert root.metadata["cloudpivot_instance"] == str(copy.pk)

    # an image-booted instance is not rebuilt from it either: the image holds no disk
    os_volumes.connection.options["root_disk"] = "ephemeral"
    os_volumes.connection.save()
    plain = finished(api, create(api, name="vm-plain").json()["id"])["instance"]
    refused = api("bob").post(
        f"/api/v1/instances/{plain}/actions", {"action": "restore", "snapshot": snapshot["id"]}, format="json"
    )
    assert refused.status_code == 422, refused.json()
    assert f"only Cinder snapshot {cinder_id}" in refused.json()["message"]

    # the volume it was taken of is kept by a delete, and not reclaimed while the Cinder snapshot exists
    act(api, str(instance.pk), action="delete", volumes="keep")
    kept = KeptVolume.objects.get(ref=volume.id)
    refused = api("bob").post(f"/api/v1/volumes/{kept.pk}/reclaim", format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "volume_in_use", refused.json()
    assert f"Cinder snapshot {cinder_id} (snapshot for vm1-snap" in refused.json()["message"]

    # deleting the CloudPivot snapshot deletes its image and the Cinder snapshot Nova made for it
    response = api("bob").delete(f"/api/v1/snapshots/{snapshot['id']}")
    assert response.status_code == 202, response.json()
    finished(api, response.json()["id"])
    assert Snapshot.objects.get(pk=snapshot["id"]).status == "deleted"
    assert conn.image.find_image(snapshot["image_id"], ignore_missing=True) is None
    until(lambda: conn.block_storage.find_snapshot(cinder_id, ignore_missing=True) is None, "the Cinder snapshot gone")

    # now nothing depends on the volume: the reclaim deletes it
    response = api("bob").post(f"/api/v1/volumes/{kept.pk}/reclaim", format="json")
    assert response.status_code == 202, response.json()
    assert finished(api, response.json()["id"])["result"]["reclaimed"] == "deleted"
    assert conn.block_storage.find_volume(volume.id, ignore_missing=True) is None
    # the copy's own volume came from the snapshot but does not depend on it: a purge deletes it
    assert act(api, str(copy.pk), action="delete", volumes="purge")["result"]["purged"] == [root.id]
    assert conn.block_storage.find_volume(root.id, ignore_missing=True) is None


def dry_run(api, flavor: str) -> str:
    body = {"name": "vm9", "cloud": "os-dev", "project": "alpha", "flavor": flavor, "image": "cp-runner-fake"}
    response = api("bob").post("/api/v1/instances?dry_run=true", body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["outcome"]


def test_a_zero_gb_flavor_booting_from_a_volume_holds_the_volumes_gb_of_the_quota(
    os_volumes,  # noqa: F811 - the imported fixture
    api,
    world,
):
    conn = os_volumes.conn
    # private: no other test's flavor list (or smallest-fitting choice) sees it; asked for by id
    flavor = conn.compute.create_flavor(
        name=f"cp-zero-{uuid.uuid4().hex[:6]}", vcpus=1, ram=64, disk=0, is_public=False
    )
    try:
        Quota.objects.create(project=world.alpha, max_volume_gb=1)
        assert dry_run(api, flavor.id) == "starts_now"

        operation = finished(api, create(api, flavor=flavor.id).json()["id"])
        instance = Instance.objects.get(pk=operation["instance"])
        volume = conn.block_storage.get_volume(instance.root_volume_ref)
        assert conn.compute.get_server(instance.server_id).flavor["original_name"] == flavor.name
        assert volume.size == 1 and instance.disk_gb == 1  # the flavor says 0 GB; the volume is 1 GB

        refused = create(api, name="vm2", flavor=flavor.id)  # that 1 GB fills alpha's volume quota
        assert refused.status_code == 422, refused.json()
        assert refused.json()["message"].startswith("quota exceeded: volume GB 1/0 left")
        assert refused.json()["errors"][0]["field"] == "flavor"
        assert Instance.objects.count() == 1 and dry_run(api, flavor.id) == "refused_now"

        act(api, str(instance.pk), action="delete", volumes="keep")  # kept: it holds the GB still
        assert KeptVolume.objects.get().size_gb == 1
        assert create(api, name="vm3", flavor=flavor.id).status_code == 422
        kept = KeptVolume.objects.get()
        finished(api, api("bob").post(f"/api/v1/volumes/{kept.pk}/reclaim", format="json").json()["id"])
        assert dry_run(api, flavor.id) == "starts_now"  # the GB are free again
    finally:
        for server in conn.compute.servers(flavor=flavor.id):
            conn.compute.delete_server(server, ignore_missing=True)
        conn.compute.delete_flavor(flavor, ignore_missing=True)


def check_cloud(cloud_id: str) -> str:
    out = io.StringIO()
    try:
        call_command("check_cloud", cloud_id, stdout=out)
    except CommandError as exc:
        out.write(f"ERROR {exc}")
    return out.getvalue()


def test_root_disk_volume_on_a_cloud_without_block_storage_is_refused_up_front(
    api, world, openstack_cloud, cloud_without, settings
):
    settings.INSTALLATION_ID = f"nocinder-{uuid.uuid4().hex[:6]}"
    connection = CloudConnection.objects.create(
        cloud_id="os-nocinder",
        backend="openstack",
        credentials_ref=cloud_without(*BLOCK_STORAGE_TYPES),
        options={
            "cloud": openstack_cloud.cloud,
            "flavor": "cp.tiny",
            "image": "cp-runner-fake",
            "networks": "none",
            "root_disk": "volume",
        },
    )
    connection.projects.add(world.alpha)
    body = {"name": "vm1", "cloud": "os-nocinder", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}

    for path in ("/api/v1/instances", "/api/v1/instances?dry_run=true"):
        response = api("bob").post(path, body, format="json")
        answer = response.json()
        assert response.status_code == 400 and answer["code"] == "invalid", answer
        assert answer["errors"][0]["field"] == "root_disk"
        assert answer["message"] == answer["errors"][0]["message"]
        assert "has no block-storage (Cinder) service in its catalog, so no volume can be made" in answer["message"]
        assert 'root_disk to "ephemeral"' in answer["message"]
    assert not Instance.objects.exists() and not Operation.objects.exists()

    out = check_cloud("os-nocinder")
    assert "ok      compute service (Nova)" in out  # the stand-in's catalog leads to the real services
    assert 'MISSING block-storage service (Cinder): absent, but root_disk is "volume"' in out
    assert "ERROR" in out

    # the same cloud with ephemeral root disks: nothing to refuse (Cinder is optional then)
    connection.options["root_disk"] = "ephemeral"
    connection.save()
    dry = api("bob").post("/api/v1/instances?dry_run=true", body, format="json")
    assert dry.status_code == 200 and dry.json()["outcome"] == "starts_now", dry.json()
    out = check_cloud("os-nocinder")
    assert "absent  block-storage service (Cinder): absent: volumes cannot be listed" in out
    assert "ERROR" not in out
