"""Another project's snapshot never boots: not through a plain create naming its image, not through
a restore-as-new-instance on a connection the project may no longer use.

The images are real Glance images on the development OpenStack (queued: a create only looks them up).
"""

from __future__ import annotations

import uuid

import pytest

from resources.models import Instance, Snapshot
from tasks.models import Task
from tests.builders import snapshot_row

pytestmark = pytest.mark.e2e


@pytest.fixture
def glance_image(os_world):
    """Make a real image record in the shared tenant, with the given properties; deleted afterwards."""
    made = []

    def make(**properties):
        image = os_world.conn.image.create_image(
            name=f"cp-test-{uuid.uuid4().hex[:8]}",
            disk_format="raw",
            container_format="bare",
            allow_duplicates=True,
            meta=properties,
        )
        made.append(image.id)
        return image

    yield make
    for image_id in made:
        os_world.conn.image.delete_image(image_id, ignore_missing=True)


def create(api, image, user="bob", project="alpha"):
    body = {"name": "vm1", "cloud": "os-dev", "project": project, "flavor": "cp.tiny", "image": image}
    return api(user).post("/api/v1/instances", body, format="json")


def test_a_create_cannot_boot_another_projects_snapshot_image(os_world, api, glance_image):
    world = os_world.world
    image = glance_image()
    beta_snapshot = snapshot_row(
        connection=os_world.connection, project=world.beta, owner=world.charlie, image_id=image.id
    )
    for name in (image.id, image.name):
        response = create(api, name)
        assert response.status_code == 403, response.json()
        assert response.json()["code"] == "restore_other_project"
        assert response.json()["errors"][0]["field"] == "image"
        assert response.json()["message"] == (
            f"snapshot {beta_snapshot.name} belongs to project beta; it cannot be restored into project alpha"
        )
    assert not Instance.objects.exists()
    assert create(api, image.id, user="charlie", project="beta").status_code == 202


def test_a_create_cannot_boot_a_marked_image_no_snapshot_of_the_project_owns(os_world, api, glance_image):
    world = os_world.world
    orphan = glance_image(cloudpivot_snapshot=str(uuid.uuid4()))
    response = create(api, orphan.id)
    assert response.status_code == 403, response.json()
    assert response.json()["code"] == "restore_other_project"
    assert response.json()["errors"] == [
        {
            "field": "image",
            "message": f"image {orphan.id} is a CloudPivot snapshot that no snapshot of project alpha owns; "
            "it cannot be restored into project alpha",
        }
    ]
    # alpha's own live snapshot boots; once deleted it no longer does
    own = snapshot_row(connection=os_world.connection, project=world.alpha, owner=world.bob, image_id="")
    mine = glance_image(cloudpivot_snapshot=str(own.pk))
    Snapshot.objects.filter(pk=own.pk).update(image_id=mine.id)
    assert create(api, mine.id).status_code == 202
    Snapshot.objects.filter(pk=own.pk).update(status="deleted")
    assert create(api, mine.id).status_code == 403
    assert Instance.objects.count() == 1


def test_restore_as_new_instance_needs_the_connection_grant(os_world, api):
    world = os_world.world
    snapshot = snapshot_row(connection=os_world.connection, project=world.alpha, owner=world.bob, image_id="img-1")
    os_world.connection.projects.remove(world.alpha)
    response = api("bob").post(
        f"/api/v1/snapshots/{snapshot.pk}/restore", {"name": "copy", "flavor": "cp.tiny"}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert response.json()["errors"] == [{"field": "cloud", "message": "project alpha may not use cloud os-dev"}]
    assert not Instance.objects.exists()


def submit_task(api, image, user="bob", project="alpha"):
    body = {"cloud": "os-dev", "project": project, "image": image, "command": ["true"]}
    return api(user).post("/api/v1/tasks", body, format="json")


def test_a_task_cannot_boot_another_projects_snapshot_image_either(os_world, api, glance_image):
    """The instances' rule, shared (clusters.ownership): a task's VM boots no other project's snapshot."""
    world = os_world.world
    image = glance_image()
    beta_snapshot = snapshot_row(
        connection=os_world.connection, project=world.beta, owner=world.charlie, image_id=image.id
    )
    orphan = glance_image(cloudpivot_snapshot=str(uuid.uuid4()))
    for name in (image.id, image.name, orphan.id):
        response = submit_task(api, name)
        assert response.status_code == 403, response.json()
        assert response.json()["code"] == "restore_other_project"
        assert response.json()["errors"][0]["field"] == "image"
    assert submit_task(api, image.id).json()["message"] == (
        f"snapshot {beta_snapshot.name} belongs to project beta; it cannot be restored into project alpha"
    )
    assert not Task.objects.exists()
    # The owner's task boots it, and the start boots exactly the image that was checked (its id is pinned).
    response = submit_task(api, image.name, user="charlie", project="beta")
    assert response.status_code == 201, response.json()
    assert Task.objects.get(pk=response.json()["id"]).normalized["image_id"] == image.id


def test_a_task_counts_its_flavors_vcpu_and_memory_kept_on_the_connection(os_world, api):
    """cp.tiny is 1 vCPU / 64 MB: what the VM holds, whatever the task says; kept on the connection."""
    response = submit_task(api, "cp-runner-fake")
    assert response.status_code == 201, response.json()
    assert Task.objects.get(pk=response.json()["id"]).normalized["resources"] == {"cpu": 1, "memory_mb": 64, "gpu": 0}
    os_world.connection.refresh_from_db()
    assert os_world.connection.facts["flavors"]["cp.tiny"] == {"vcpus": 1, "memory_mb": 64}
    too_big = api("bob").post(
        "/api/v1/tasks",
        {"cloud": "os-dev", "project": "alpha", "command": ["true"], "resources": {"memory_mb": 4096}},
        format="json",
    )
    assert too_big.status_code == 400
    assert too_big.json()["errors"] == [
        {
            "field": "resources.memory_mb",
            "message": "the task asks 4096 MB memory but a task on the os-dev cloud gets 64 (its flavor cp.tiny)",
        }
    ]
