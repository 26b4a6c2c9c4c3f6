"""The edges of `root_disk: volume` on the real development OpenStack (Nova + Cinder, deploy/dev/openstack):
- a snapshot of a volume-booted instance is a 0-byte Glance image naming a Cinder snapshot: it launches new
  instances (each root volume made from that Cinder snapshot), cannot rebuild the instance in place (refused in
  words before any Operation), and its delete, or its prune, takes the Cinder snapshot along;
- a flavor with no disk still boots from a 1 GB volume, and the volume quota counts that 1 GB;
- a cloud whose catalog has no Cinder (a Keystone project with an endpoint filter) refuses such a create in
  words, and refuses extra volumes on `volumes`.
Every claim about the cloud is checked with the admin's own openstacksdk reads.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from cloudpivot.accounts.models import Quota
from clusters.models import CloudConnection
from resources.backends import get_instance_backend
from resources.models import Instance, Operation, Snapshot
from tests import helpers
from tests.plugins.openstack import INSTALLATION, tenant_connection, tenant_of_its_own
from tests.resources.openstack_support import act, create, finished, running_on_a_volume

pytestmark = [pytest.mark.e2e]


def cinder_snapshot_of(conn, image_id: str) -> str:
    (mapping,) = json.loads(conn.image.get_image(image_id).properties["block_device_mapping"])
    assert mapping["source_type"] == "snapshot" and mapping["boot_index"] == 0
    return mapping["snapshot_id"]


def test_a_volume_booted_snapshot_launches_anew_is_not_rebuilt_in_place_and_goes_whole(os_volumes, api):
    conn = os_volumes.conn
    instance, volume = running_on_a_volume(api, os_volumes)

    operation = act(api, str(instance.pk), action="snapshot", name="s1")
    snapshot = api("rita").get(f"/api/v1/snapshots/{operation['snapshot']}").json()
    assert snapshot["status"] == "available"
    cinder_snapshot = conn.block_storage.get_snapshot(cinder_snapshot_of(conn, snapshot["image_id"]))
    assert cinder_snapshot.volume_id == volume.id and cinder_snapshot.status == "available"
    assert snapshot["size_bytes"] == 2**30  # the Glance image has 0 bytes; the 1 GB are in Cinder

    response = api("bob").post(
        f"/api/v1/instances/{instance.pk}/actions", {"action": "restore", "snapshot": snapshot["id"]}, format="json"
    )
    assert response.status_code == 422, response.json()
    message = (
        "instance vm1 boots from a Cinder volume, which Nova cannot rebuild in place from a snapshot; "
        "launch a new instance from the snapshot instead (POST /api/v1/snapshots/<id>/restore)"
    )
    assert response.json()["errors"] == [{"field": "action", "message": message}]
    assert not Operation.objects.filter(action="restore").exists()

    response = api("bob").post(
        f"/api/v1/snapshots/{snapshot['id']}/restore", {"name": "vm1-copy", "flavor": "cp.tiny"}, format="json"
    )
    assert response.status_code == 202, response.json()
    copy = Instance.objects.get(pk=finished(api, response.json()["id"])["instance"])
    root = conn.block_storage.get_volume(copy.root_volume_ref)
    assert root.snapshot_id == cinder_snapshot.id and root.is_bootable and root.status == "in-use"
    assert [a["server_id"] for a in root.attachments] == [copy.server_id]

    act(api, str(copy.pk), action="delete", volumes="purge")
    response = api("bob").delete(f"/api/v1/snapshots/{snapshot['id']}")
    assert response.status_code == 202, response.json()
    assert finished(api, response.json()["id"])["result"]["image_id"] == snapshot["image_id"]
    assert Snapshot.objects.get(pk=snapshot["id"]).status == "deleted"
    assert conn.image.find_image(snapshot["image_id"], ignore_missing=True) is None
    helpers.wait_for(
        lambda: conn.block_storage.find_snapshot(cinder_snapshot.id, ignore_missing=True) is None,
        timeout=60,
        what="Cinder's snapshot deleted with the image",
    )


def test_a_pruned_snapshot_of_a_volume_booted_instance_takes_its_cinder_snapshot(os_volumes, api, world):
    Quota.objects.create(project=world.alpha, max_snapshots=1)
    conn = os_volumes.conn
    instance, _ = running_on_a_volume(api, os_volumes)
    first = act(api, str(instance.pk), action="snapshot", name="s1")
    first_image = Snapshot.objects.get(pk=first["snapshot"]).image_id
    first_cinder = cinder_snapshot_of(conn, first_image)

    second = act(api, str(instance.pk), action="snapshot", name="s2")

    assert second["result"]["pruned"] == [first["snapshot"]]
    assert conn.image.find_image(first_image, ignore_missing=True) is None
    helpers.wait_for(
        lambda: conn.block_storage.find_snapshot(first_cinder, ignore_missing=True) is None,
        timeout=60,
        what="the pruned snapshot's Cinder snapshot deleted",
    )
    kept = cinder_snapshot_of(conn, Snapshot.objects.get(pk=second["snapshot"]).image_id)
    assert conn.block_storage.get_snapshot(kept).status == "available"


@pytest.fixture
def diskless(os_instances, openstack_cloud, tmp_path):
    """A connection booting from volumes in a Keystone project of its own, the only one that may use a flavor
    with no disk. A public such flavor would be the smallest size on every other test's launch form (CI runs
    two suites on one cloud), and that form preselects the smallest. Jobs run inline, as for `os_instances`."""
    conn = openstack_cloud.conn
    with tenant_of_its_own(openstack_cloud, tmp_path, cloud="diskless") as tenant:
        flavor = conn.compute.create_flavor(name=f"cp.nodisk-{tenant.name}", ram=64, vcpus=1, disk=0, is_public=False)
        try:
            conn.compute.flavor_add_tenant_access(flavor, tenant.project.id)
            tenant_connection(tenant, "os-diskless", os_instances.world.alpha, flavor=flavor.name, root_disk="volume")
            yield SimpleNamespace(flavor=flavor.name, image=tenant.image)
        finally:
            conn.compute.delete_flavor(flavor, ignore_missing=True)


def test_a_diskless_flavor_boots_from_a_1_gb_volume_that_quota_counts(diskless, api, world, openstack_cloud):
    shared = get_instance_backend(CloudConnection.objects.get(cloud_id="os-dev")).flavors()
    assert diskless.flavor not in {flavor.name for flavor in shared}  # other tests' launch forms never offer it
    quota = Quota.objects.create(project=world.alpha, max_volume_gb=0)
    body = {
        "name": "vm1",
        "cloud": "os-diskless",
        "project": "alpha",
        "flavor": diskless.flavor,
        "image": diskless.image,
    }
    verdict = api("bob").post("/api/v1/instances?dry_run=true", body, format="json").json()
    assert verdict["outcome"] == "never_fits", verdict
    assert (verdict["limit"]["resource"], verdict["limit"]["requested"]) == ("disk_gb", 1), verdict

    quota.max_volume_gb = 1
    quota.save()
    operation = finished(api, create(api, **body).json()["id"])
    instance = Instance.objects.get(pk=operation["instance"])
    assert instance.disk_gb == 1
    assert openstack_cloud.conn.block_storage.get_volume(instance.root_volume_ref).size == 1

    again = create(api, **body | {"name": "vm2"})
    assert again.status_code == 422, again.json()
    assert again.json()["message"].startswith("quota exceeded: volume GB 1/0 left"), again.json()


@pytest.fixture
def no_cinder(openstack_cloud, world, tmp_path, settings):
    """A connection to a project whose catalog lists everything but Cinder, as a cloud without block storage."""
    settings.INSTALLATION_ID = INSTALLATION
    with tenant_of_its_own(openstack_cloud, tmp_path, cloud="nocinder", hide=("volumev3", "block-storage")) as tenant:
        yield tenant_connection(tenant, "os-nocinder", world.alpha)


@pytest.mark.django_db
def test_a_cloud_without_cinder_refuses_a_volume_root_disk_and_extra_volumes_in_words(no_cinder, api):
    image = no_cinder.options["image"]
    body = {"name": "vm1", "cloud": "os-nocinder", "project": "alpha", "flavor": "cp.tiny", "image": image}
    refused = api("bob").post("/api/v1/instances", body | {"volumes": [{"size_gb": 1}]}, format="json")
    assert refused.status_code == 400, refused.json()
    assert refused.json()["errors"] == [
        {
            "field": "volumes",
            "message": "the os-nocinder cloud offers no volumes to attach: it has no block storage (Cinder)",
        }
    ]

    no_cinder.options["root_disk"] = "volume"
    no_cinder.save()
    refused = api("bob").post("/api/v1/instances", body, format="json")
    assert refused.status_code == 422, refused.json()
    message = (
        "the os-nocinder cloud is set to boot instances from a volume (root_disk: volume) but has no block storage "
        "(Cinder) in its catalog; an admin sets root_disk to ephemeral on the connection, or adds Cinder"
    )
    assert refused.json()["errors"] == [{"field": "cloud", "message": message}]
    assert not Instance.objects.exists() and not Operation.objects.exists()
