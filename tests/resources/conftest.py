"""Instances against the real development OpenStack (tests/plugins/openstack.py starts it).

`snapshot_filler` plays the part of a real hypervisor's snapshot upload, which Nova's fake driver
skips: it fills each queued snapshot image CloudPivot asked for with bytes, as the recipe's harness does.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import openstack
import openstack.config
import pytest
from django.db import connection as db_connection
from django_q.conf import Conf

from clusters.models import CloudConnection
from resources.models import Operation
from resources.services import operation_run
from tests.plugins.openstack import INSTALLATION
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
