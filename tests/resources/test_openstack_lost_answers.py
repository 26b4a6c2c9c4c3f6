"""Calls whose answer is lost, on the real development OpenStack: to a timeout, or to a worker that died.

Nova goes on with a request after its client gave up (a volume-booted server's snapshot can outlast the
API timeout on a busy cloud: nova-api makes the Cinder snapshot before it answers; a create waits on
Glance and Neutron before it answers). Played for real: a proxy in front of Nova holds the chosen request
back longer than the connection's API timeout, then passes it on. The Operation must adopt what Nova made
(a server by the instance's tag, an image by its `cloudpivot_snapshot` property) rather than fail, and
must not ask twice. A resumed Operation whose dead worker's call reached Nova, but whose image id was never
written, adopts that image the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from resources import jobs
from resources.models import Operation, Snapshot
from tests.builders import left_by_a_dead_worker
from tests.clusters.slow_proxy import SlowProxy
from tests.plugins.openstack import INSTALLATION
from tests.resources.openstack_support import act, create, finished, instance, running_instance, settle

pytestmark = [pytest.mark.e2e]

API_TIMEOUT = 10  # seconds: every other call of the test answers well within it, even on a loaded box
HELD_BACK = 14  # the createImage reaches Nova this late: its answer is lost to CloudPivot


class FirstActionOnceArmed:
    """Picks the first `POST …/servers/<id>/action` after `arm()`: the snapshot's createImage (the Operation
    reads the server with GETs before it), not the console reads (also actions) of the create's read-back."""

    def __init__(self) -> None:
        self.armed = threading.Event()

    def arm(self) -> None:
        self.armed.set()

    def __call__(self, method: str, path: str) -> bool:
        if self.armed.is_set() and method == "POST" and path.endswith("/action"):
            self.armed.clear()
            return True
        return False


@contextmanager
def through_a_slow_nova(os_instances, tmp_path: Path, slow) -> Iterator[SlowProxy]:
    """The test's connection talks to Nova through a SlowProxy that holds back what `slow` picks."""
    nova = os_instances.conn.compute.get_endpoint()  # http://127.0.0.1:8774/v2.1
    proxy = SlowProxy(nova, delay=HELD_BACK, slow=slow)
    clouds = yaml.safe_load(Path(os_instances.cloud.clouds_yaml).read_text())
    entry = clouds["clouds"][os_instances.cloud.cloud]
    entry["compute_endpoint_override"] = proxy.url + nova.split(":8774", 1)[1]
    clouds_yaml = tmp_path / "through-the-proxy.yaml"
    clouds_yaml.write_text(yaml.safe_dump(clouds))
    connection = os_instances.connection
    connection.credentials_ref = str(clouds_yaml)
    connection.options = {**connection.options, "api_timeout_seconds": API_TIMEOUT}
    connection.save()
    try:
        yield proxy
    finally:
        proxy.close()


def test_a_create_whose_answer_was_lost_adopts_the_server_nova_made(os_instances, api, tmp_path):
    conn = os_instances.conn
    with through_a_slow_nova(os_instances, tmp_path, lambda method, path: (method, path) == ("POST", "/v2.1/servers")):
        response = create(api)
        assert response.status_code == 202, response.json()
        operation = finished(api, response.json()["id"])

    instance_id = operation["instance"]
    servers = list(conn.compute.servers(tags=f"cpi-{instance_id.replace('-', '')}"))
    assert [s.id for s in servers] == [operation["result"]["server_id"]]  # asked once, adopted
    assert instance(api, instance_id)["status"] == "Running"


def test_a_snapshot_whose_answer_was_lost_adopts_the_image_nova_made(os_instances, api, snapshot_filler, tmp_path):
    conn = os_instances.conn
    creates_image = FirstActionOnceArmed()
    with through_a_slow_nova(os_instances, tmp_path, creates_image) as proxy:
        response = create(api)
        assert response.status_code == 202, response.json()
        instance_id = finished(api, response.json()["id"])["instance"]

        creates_image.arm()
        operation = act(api, instance_id, action="snapshot", name="kept")

        snapshot = Snapshot.objects.get(pk=operation["snapshot"])
        assert proxy.most_held == 1 and not creates_image.armed.is_set()  # the createImage was held back
    actions = [a.action for a in conn.compute.server_actions(snapshot.instance.server_id)]
    assert actions.count("createImage") == 1, actions  # asked once: the lost answer was not asked again
    assert made_as(conn, snapshot) == [snapshot.image_id]
    assert snapshot.status == "available" and conn.image.get_image(snapshot.image_id).status == "active"


def made_as(conn, snapshot: Snapshot) -> list[str]:
    """Glance's images made as this CloudPivot snapshot (its `cloudpivot_snapshot` property)."""
    images = conn.image.images(name=snapshot.name)
    return [image.id for image in images if (image.properties or {}).get("cloudpivot_snapshot") == str(snapshot.pk)]


def test_a_resumed_snapshot_adopts_the_image_its_dead_worker_asked_for(os_instances, snapshot_filler):
    """The worker died after Nova took its createImage and before it wrote the image id down."""
    conn = os_instances.conn
    instance = running_instance(os_instances)
    snapshot = Snapshot.objects.create(
        name="asked-once",
        project=instance.project,
        owner=instance.owner,
        connection=instance.connection,
        instance=instance,
    )
    metadata = {"cloudpivot_snapshot": str(snapshot.pk), "cloudpivot_installation": INSTALLATION}
    conn.compute.create_server_image(instance.server_id, name=snapshot.name, metadata=metadata, wait=False)
    settle(os_instances, instance.server_id, "ACTIVE")
    operation = left_by_a_dead_worker(instance, "snapshot", called=False, snapshot=str(snapshot.pk))
    Operation.objects.filter(pk=operation.pk).update(snapshot=snapshot)

    jobs.refresh()  # the reaper enqueues it; the job runs inline (SYNC) and resumes it

    operation.refresh_from_db()
    snapshot.refresh_from_db()
    assert operation.state == "succeeded", operation.error_message
    assert operation.result["resumed"] == 1
    actions = [a.action for a in conn.compute.server_actions(instance.server_id)]
    assert actions.count("createImage") == 1, actions  # the resume did not ask again
    assert made_as(conn, snapshot) == [snapshot.image_id]
    assert snapshot.status == "available"
