"""Instances against the real development OpenStack (tests/plugins/openstack.py starts it).

`snapshot_filler` plays the part of a real hypervisor's snapshot upload, which Nova's fake driver
skips: it fills each queued snapshot image CloudPivot asked for with bytes, as the recipe's harness does.
`os_volumes` boots from Cinder root volumes; `full_tenant` is a project whose Nova quota allows no instance.
The steps these tests share are in tests/resources/openstack_support.py.
"""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace

import openstack
import openstack.config
import pytest
from django.db import connection as db_connection
from django_q.conf import Conf

from clusters.models import CloudConnection
from resources.models import Operation
from resources.services import operation_run
from tests.plugins.openstack import INSTALLATION, sweep_volumes, tenant_of_its_own
from tests.resources.kubevirt_world import kv  # noqa: F401 - the KubeVirt cluster fixture, for test_kubevirt*.py


def make_connection(openstack_cloud, world) -> CloudConnection:
    connection = CloudConnection.objects.create(
        cloud_id="os-dev",
        backend="openstack",
        credentials_ref=openstack_cloud.clouds_yaml,
        options={"cloud": openstack_cloud.cloud, "flavor": "cp.tiny", "image": "cp-runner-fake", "networks": "none"},
    )
    connection.projects.add(world.alpha, world.beta)
    return connection


@pytest.fixture
def os_world(world, openstack_cloud, settings):
    """The world plus an `os-dev` connection granted to alpha and beta; jobs are only queued, never run."""
    settings.INSTALLATION_ID = INSTALLATION
    return SimpleNamespace(world=world, connection=make_connection(openstack_cloud, world), conn=openstack_cloud.conn)


@pytest.fixture
def os_instances(transactional_db, world, openstack_cloud, settings, monkeypatch):
    """Jobs run inline when their transaction commits (a worker's part), against the real cloud."""
    settings.INSTALLATION_ID = INSTALLATION
    settings.INSTANCE_OPERATION_DEADLINE_SECONDS = 60
    monkeypatch.setattr(Conf, "SYNC", True)
    connection = make_connection(openstack_cloud, world)
    yield SimpleNamespace(world=world, connection=connection, conn=openstack_cloud.conn, cloud=openstack_cloud)
    conn = openstack_cloud.conn
    for server in list(conn.compute.servers(tags=f"cloudpivot-{INSTALLATION}")):
        conn.compute.delete_server(server.id, ignore_missing=True)


@pytest.fixture
def snapshot_filler(openstack_cloud):
    """A thread that finishes CloudPivot's queued snapshot images: formats, then the bytes (→ active)."""
    config = openstack.config.OpenStackConfig(config_files=[openstack_cloud.clouds_yaml])
    conn = openstack.connection.Connection(config=config.get_one(cloud=openstack_cloud.cloud))
    stop, filled, errors = threading.Event(), [], []

    def run() -> None:
        while not stop.is_set():
            try:
                for image in conn.image.images(status="queued"):
                    if (image.properties or {}).get("cloudpivot_installation") != INSTALLATION:
                        continue
                    conn.image.update_image(image.id, disk_format="raw", container_format="bare")
                    response = conn.image.put(
                        f"/images/{image.id}/file",
                        data=b"fake snapshot bytes\n" * 64,
                        headers={"Content-Type": "application/octet-stream"},
                    )
                    response.raise_for_status()
                    filled.append(image.id)
            except Exception as exc:  # reported by the test through `errors`
                errors.append(exc)
            stop.wait(0.3)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield SimpleNamespace(filled=filled, errors=errors, conn=conn)
    stop.set()
    thread.join(timeout=10)
    for image_id in filled:
        conn.image.delete_image(image_id, ignore_missing=True)


@pytest.fixture
def operations_worker(os_instances):
    """The test process plays the worker for pages served by the live Daphne (which only queues jobs)."""
    stop, errors = threading.Event(), []

    def loop():
        try:
            while not stop.is_set():
                for pk in list(Operation.objects.filter(state="pending").values_list("pk", flat=True)):
                    try:
                        operation_run(operation_id=str(pk))
                    except Exception as exc:  # reported at teardown
                        errors.append(exc)
                stop.wait(0.2)
        finally:
            db_connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=90)
    assert not errors, errors


@pytest.fixture
def os_volumes(os_instances):
    """os_instances with `root_disk: volume`; `other_server()` boots a server not CloudPivot's; ours swept after."""
    os_instances.connection.options["root_disk"] = "volume"
    os_instances.connection.save()
    conn, others = os_instances.conn, []
    os_instances.other_server = lambda **kw: others.append(other_server(conn, **kw)) or others[-1]
    yield os_instances
    for server in others:
        conn.compute.delete_server(server, ignore_missing=True)
    sweep_volumes(conn, installation=INSTALLATION)  # whatever a failed test left of ours


def other_server(conn, *, volume_id: str = ""):
    """A server that is not CloudPivot's, booted from the image; with `volume_id` attached to it."""
    server = conn.compute.create_server(
        name=f"someone-elses-{uuid.uuid4().hex[:6]}",
        flavor_id=conn.compute.find_flavor("cp.tiny").id,
        image_id=conn.image.find_image("cp-runner-fake").id,
        networks="none",
    )
    server = conn.compute.wait_for_server(server, status="ACTIVE", interval=1, wait=120)
    if volume_id:
        conn.compute.create_volume_attachment(server, volume_id=volume_id)
        conn.block_storage.wait_for_status(conn.block_storage.get_volume(volume_id), "in-use", interval=1, wait=60)
    return server


@pytest.fixture
def full_tenant(openstack_cloud, tmp_path):
    """A Keystone project of its own (cloud `full` in its clouds.yaml) whose instance quota in Nova is 0."""
    conn = openstack_cloud.conn
    with tenant_of_its_own(openstack_cloud, tmp_path, cloud="full") as tenant:
        conn.set_compute_quotas(tenant.project.id, instances=0)
        yield SimpleNamespace(clouds_yaml=tenant.clouds_yaml, image=tenant.image)
