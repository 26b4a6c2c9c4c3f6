"""Instance pages through Django's test client: visibility, the buttons the state table allows, and the
action form calling the same service as the API (the job is only queued here)."""

from __future__ import annotations

import pytest
from django.test import Client

from resources.models import Instance, Operation
from resources.services import instance_create

pytestmark = pytest.mark.e2e


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def running(os_world):
    world = os_world.world
    data = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    operation, _ = instance_create(user=world.bob, data=data)
    Operation.objects.filter(pk=operation.pk).update(state="succeeded")
    Instance.objects.filter(pk=operation.instance_id).update(status="Running", server_id="s-1", operation=None)
    return Instance.objects.get(pk=operation.instance_id)


def test_the_list_and_detail_show_project_instances_and_hide_others(os_world, running):
    world = os_world.world
    listing = page_client(world.rita).get("/instances/")
    assert listing.status_code == 200 and f"/instances/{running.pk}/" in listing.content.decode()
    assert str(running.pk) not in page_client(world.charlie).get("/instances/").content.decode()
    assert page_client(world.charlie).get(f"/instances/{running.pk}/").status_code == 404
    detail = page_client(world.rita).get(f"/instances/{running.pk}/").content.decode()
    assert 'data-status="Running"' in detail and 'id="instance-actions"' not in detail  # a reader gets no buttons


def test_the_buttons_follow_the_state_table_and_an_action_posts_an_operation(os_world, running):
    bob = page_client(os_world.world.bob)
    detail = bob.get(f"/instances/{running.pk}/").content.decode()
    for label in ("Stop", "Reboot", "Hard reboot", "Pause", "Suspend", "Snapshot", "Delete (keep volumes)"):
        assert f">{label}</button>" in detail, label
    for label in ("Start", "Unpause", "Resume"):
        assert f">{label}</button>" not in detail, label
    response = bob.post(f"/instances/{running.pk}/act/", {"action": "stop"})
    assert response.status_code == 302
    operation = Operation.objects.get(instance=running, action="stop")
    panel = bob.get(f"/instances/{running.pk}/panel/").content.decode()
    assert "stop in progress (pending)" in panel and f'data-operation="{operation.pk}"' in panel
    # A second action while one is in flight is refused with the reason, not a 500
    response = bob.post(f"/instances/{running.pk}/act/", {"action": "pause"}, follow=True)
    assert "operation in flight" in response.content.decode()
    assert page_client(os_world.world.rita).post(f"/instances/{running.pk}/act/", {"action": "stop"}).status_code == 403
