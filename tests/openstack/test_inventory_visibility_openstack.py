"""Two projects share an OpenStack connection (the real dev cloud): each member sees the servers of
their own project's attempts and not the other project's snapshot images; the tenant's quota is for admins."""

from __future__ import annotations

import uuid

import pytest

from clusters.backends.openstack import installation_tag
from clusters.backends.openstack.client import META_ATTEMPT, META_TASK
from clusters.models import CloudConnection
from resources.models import Snapshot
from tasks.services.submission import task_submit
from tests.builders import admit

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared_cloud(world, openstack_cloud, settings):
    settings.INSTALLATION_ID = f"test-{uuid.uuid4().hex[:8]}"
    connection = CloudConnection.objects.create(
        cloud_id="os-share",
        backend="openstack",
        credentials_ref=openstack_cloud.clouds_yaml,
        options={"cloud": openstack_cloud.cloud, "flavor": "cp.tiny", "image": "cp-runner-fake", "networks": "none"},
    )
    connection.projects.add(world.alpha, world.beta)
    made: list = []
    yield connection, openstack_cloud.conn, made
    for delete in made:
        delete()


def server_for(conn, made: list, user) -> str:
    """A server as the backend would boot it for the user's task's first attempt."""
    task, _ = task_submit(user=user, document={"cloud": "os-share", "command": ["true"]})
    attempt = admit(task)
    server = conn.compute.create_server(
        name=attempt.external_name,
        flavor_id=conn.compute.find_flavor("cp.tiny", ignore_missing=False).id,
        image_id=conn.image.find_image("cp-runner-fake", ignore_missing=False).id,
        networks="none",
        metadata={META_TASK: str(task.pk), META_ATTEMPT: attempt.external_name},
        tags=[installation_tag()],
    )
    made.append(lambda: conn.compute.delete_server(server.id, ignore_missing=True))
    return server.id


def test_members_see_their_projects_servers_and_not_other_projects_snapshot_images(shared_cloud, api, world):
    connection, conn, made = shared_cloud
    alphas, betas = server_for(conn, made, world.bob), server_for(conn, made, world.charlie)
    image = conn.image.create_image(
        name=f"snap-beta-{uuid.uuid4().hex[:6]}", disk_format="raw", container_format="bare", visibility="private"
    )
    made.append(lambda: conn.image.delete_image(image.id, ignore_missing=True))
    Snapshot.objects.create(
        name="beta's disk", project=world.beta, owner=world.charlie, connection=connection, image_id=image.id
    )

    def ids(user, kind):
        answer = api(user).get(f"/api/v1/clouds/os-share/resources/{kind}")
        assert answer.status_code == 200, answer.content
        return {item["id"] for item in answer.json()["items"]}

    assert alphas in ids("rita", "servers") and betas not in ids("rita", "servers")
    assert betas in ids("charlie", "servers") and alphas not in ids("charlie", "servers")
    assert image.id not in ids("rita", "images") and image.id in ids("charlie", "images")
    assert conn.image.find_image("cp-runner-fake").id in ids("rita", "images")  # the catalogue stays
    assert api("rita").get("/api/v1/clouds/os-share/resources/quotas").status_code == 403
    world.rita.is_staff = True
    world.rita.save()
    assert {alphas, betas} <= ids("rita", "servers") and image.id in ids("rita", "images")
