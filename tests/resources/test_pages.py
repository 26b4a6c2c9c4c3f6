"""Instance pages through Django's test client: visibility, the buttons the state table allows, and the
action form calling the same service as the API (the job is only queued here)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.test import Client
from django.utils import timezone

from clusters.models import MetricSample
from resources.models import Instance, Operation, Snapshot
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


def test_the_detail_page_charts_the_servers_sampled_cpu_and_memory(os_world, running):
    """Rendering only: the samples are written here; sampling real Nova diagnostics is
    tests/openstack/test_metrics_openstack.py's job."""
    bob = page_client(os_world.world.bob)
    assert "No samples yet" in bob.get(f"/instances/{running.pk}/").content.decode()
    now = timezone.now()
    for minutes_ago, cores, memory in ((10, 0.5, 2**29), (5, 0.75, 2**30), (0, 0.25, 2**29)):
        for metric, value in (("cpu_used_cores", cores), ("memory_used_bytes", memory)):
            MetricSample.objects.create(
                connection=running.connection,
                subject_kind="instance",
                subject_key=running.server_id,
                metric=metric,
                value=value,
                timestamp=now - dt.timedelta(minutes=minutes_ago),
            )
    MetricSample.objects.create(  # another server's figures stay on its own page
        connection=running.connection,
        subject_kind="instance",
        subject_key="someone-elses-server",
        metric="cpu_used_cores",
        value=9,
        timestamp=now,
    )
    page = bob.get(f"/instances/{running.pk}/").content.decode()
    charts = dict(re.findall(r'data-metric-chart="([^"]+)" data-points="(\d+)"', page))
    assert charts == {"CPU in use": "3", "Memory in use": "3"}
    assert "No samples yet" not in page


def test_a_snapshot_offers_a_copy_and_restores_in_place_only_where_nova_can_rebuild(os_world, running):
    """A volume-booted server cannot be rebuilt from its snapshot (Nova): its page offers the copy only."""
    world = os_world.world
    snapshot = Snapshot.objects.create(
        name="golden",
        project=world.alpha,
        owner=world.bob,
        connection=os_world.connection,
        instance=running,
        image_id="img-1",
        status="available",
    )
    copy_link = (
        f'href="/instances/new/?cloud=os-dev&amp;project=alpha&amp;image=snapshot:{snapshot.pk}">Launch a copy</a>'
    )
    detail = page_client(world.bob).get(f"/instances/{running.pk}/").content.decode()
    assert ">Restore</button>" in detail and copy_link in detail
    assert "Launch a copy" not in page_client(world.rita).get(f"/instances/{running.pk}/").content.decode()

    Instance.objects.filter(pk=running.pk).update(root_volume_ref="vol-1")
    detail = page_client(world.bob).get(f"/instances/{running.pk}/").content.decode()
    assert ">Restore</button>" not in detail and copy_link in detail
    launch = page_client(world.bob).get(f"/instances/new/?cloud=os-dev&project=alpha&image=snapshot:{snapshot.pk}")
    assert (
        f'<option value="snapshot:{snapshot.pk}" selected>golden (snapshot of vm1)</option>' in launch.content.decode()
    )
