"""The development OpenStack's block storage (deploy/dev/openstack): the real cinder-api, cinder-scheduler and
cinder-volume with our sparse-file backend (cinder_driver/cp_sparse_volumes.py), through openstacksdk.

Each volume is a file under $CP_OS_STATE/cinder/volumes: the tests read it to see that Cinder really stored
what it says (the image's bytes, the size, a snapshot's copy), and that a delete removes it.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from tests.plugins.openstack import STATE

pytestmark = [pytest.mark.e2e]
GiB = 1024**3
VOLUMES = STATE / "cinder" / "volumes"


@pytest.fixture
def made(openstack_cloud):
    """Volumes, snapshots, images and servers a test makes: deleted at the end, whatever happened."""
    conn, things = openstack_cloud.conn, {"servers": [], "snapshots": [], "volumes": [], "images": []}
    yield things
    for server in things["servers"]:
        conn.compute.delete_server(server, ignore_missing=True)
        _wait_gone(lambda server=server: conn.compute.find_server(server, ignore_missing=True))
    for snapshot in things["snapshots"]:
        conn.block_storage.delete_snapshot(snapshot, ignore_missing=True)
        _wait_gone(lambda snapshot=snapshot: conn.block_storage.find_snapshot(snapshot, ignore_missing=True))
    for volume in things["volumes"]:
        conn.block_storage.delete_volume(volume, ignore_missing=True)
    for image in things["images"]:
        conn.image.delete_image(image, ignore_missing=True)


def _wait_gone(find, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while find() is not None and time.monotonic() < deadline:
        time.sleep(1)


def available(conn, volume, size: int | None = None):
    """Fresh GETs until Cinder shows it available (at `size`): the SDK's own wait trusts a stale local copy."""
    deadline = time.monotonic() + 120
    while True:
        volume = conn.block_storage.get_volume(volume.id)
        assert volume.status != "error", volume
        if volume.status == "available" and (size is None or volume.size == size):
            return volume
        assert time.monotonic() < deadline, f"volume {volume.id} is {volume.status}, size {volume.size}"
        time.sleep(0.5)


def gone(find, ref):
    """Waits for `find` to find nothing: a fast delete may be done before the first look."""
    _wait_gone(lambda: find(ref, ignore_missing=True), seconds=120)
    assert find(ref, ignore_missing=True) is None, f"{ref} still there after 120 s"


def test_the_catalog_has_block_storage_and_cinder_volume_is_up(openstack_cloud):
    conn = openstack_cloud.conn
    types = {entry["type"] for entry in conn.session.auth.get_access(conn.session).service_catalog.catalog}
    assert {"volumev3", "block-storage"} <= types
    services = {(s.binary, s.host, s.state) for s in conn.block_storage.services()}
    assert ("cinder-volume", "cp-cinder@sparse", "up") in services
    assert ("cinder-scheduler", "cp-cinder", "up") in services


def test_a_volume_is_a_sparse_file_holding_the_image_and_snapshots_and_deletes_are_real(openstack_cloud, made):
    conn = openstack_cloud.conn
    payload = os.urandom(64 * 1024)  # distinct bytes, so the file shows the image was really copied in
    image = conn.image.create_image(
        name=f"cp-cinder-{uuid.uuid4().hex[:6]}", data=payload, disk_format="raw", container_format="bare"
    )
    made["images"].append(image.id)

    volume = conn.block_storage.create_volume(size=1, image_id=image.id, name="cp-cinder-from-image")
    made["volumes"].append(volume.id)
    volume = available(conn, volume)
    assert volume.is_bootable and volume.size == 1
    path = VOLUMES / f"volume-{volume.id}"
    assert path.stat().st_size == 1 * GiB
    assert path.stat().st_blocks * 512 < 16 * 1024 * 1024  # sparse: 1 GB on paper, the image's bytes on disk
    with path.open("rb") as f:
        assert f.read(len(payload)) == payload

    conn.block_storage.extend_volume(volume, 2)
    volume = available(conn, volume, size=2)
    assert volume.size == 2 and path.stat().st_size == 2 * GiB

    snapshot = conn.block_storage.create_snapshot(volume_id=volume.id, name="cp-cinder-snap")
    made["snapshots"].append(snapshot.id)
    conn.block_storage.wait_for_status(snapshot, "available", failures=["error"], interval=1, wait=120)
    copy = available(conn, conn.block_storage.create_volume(size=2, snapshot_id=snapshot.id, name="cp-cinder-copy"))
    made["volumes"].append(copy.id)
    with (VOLUMES / f"volume-{copy.id}").open("rb") as f:
        assert f.read(len(payload)) == payload

    conn.block_storage.delete_volume(copy)
    gone(conn.block_storage.find_volume, copy.id)
    assert not (VOLUMES / f"volume-{copy.id}").exists()
    conn.block_storage.delete_snapshot(snapshot)
    gone(conn.block_storage.find_snapshot, snapshot.id)
    assert not (VOLUMES / f"snapshot-{snapshot.id}").exists()


def test_nova_boots_from_a_volume_and_a_delete_leaves_it_available(openstack_cloud, made):
    """Nova's fake driver attaches nothing itself, but the attachment goes through Cinder's own state machine."""
    conn = openstack_cloud.conn
    image = conn.image.find_image("cp-runner-fake")
    flavor = conn.compute.find_flavor("cp.tiny")
    server = conn.compute.create_server(
        name=f"cp-cinder-bfv-{uuid.uuid4().hex[:6]}",
        flavor_id=flavor.id,
        networks="none",
        block_device_mapping=[
            {
                "boot_index": 0,
                "uuid": image.id,
                "source_type": "image",
                "destination_type": "volume",
                "volume_size": 1,
                "delete_on_termination": False,
            }
        ],
    )
    made["servers"].append(server.id)
    server = conn.compute.wait_for_server(server, status="ACTIVE", interval=1, wait=180)
    (attached,) = server.attached_volumes
    made["volumes"].append(attached["id"])
    volume = conn.block_storage.get_volume(attached["id"])
    assert volume.status == "in-use" and volume.is_bootable
    assert [a["server_id"] for a in volume.attachments] == [server.id]
    assert (VOLUMES / f"volume-{volume.id}").stat().st_size == 1 * GiB

    conn.compute.delete_server(server)
    conn.compute.wait_for_delete(server, interval=1, wait=120)
    volume = available(conn, volume)
    assert volume.attachments == []
