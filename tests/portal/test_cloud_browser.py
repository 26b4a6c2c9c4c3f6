"""The dashboard's quota bars and a cloud's page (inventory, Check now) in headless Chromium against the real
Daphne (`live`); the cloud is the kmock Kubernetes API server on loopback, asked by the Daphne process."""

from __future__ import annotations

import pytest
from django_q.conf import Conf
from playwright.sync_api import expect

from cloudpivot.accounts.models import Quota
from clusters.models import CloudConnection
from tests import helpers
from tests.builders import running
from tests.clusters.kube_api import NAMESPACES, NODES
from tests.plugins.browser import screenshot
from tests.plugins.kube import TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_staff_see_quota_bars_the_inventory_and_check_a_cloud_now(open_page, world, kube, kube_connection, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)  # the task's start job stays queued: it holds quota, runs nothing
    world.alice.is_staff = True
    world.alice.save()
    Quota.objects.create(project=world.alpha, max_tasks=4, max_vcpu=8, max_memory_mb=4096)
    running(world.bob, resources={"cpu": 2, "memory_mb": 1024})
    kube.put(
        NODES,
        None,
        {
            "metadata": {"name": "node-1", "labels": {"node-role.kubernetes.io/control-plane": "true"}},
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi"},
                "allocatable": {"cpu": "3500m", "memory": "15Gi"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.31.2+k3s1"},
            },
        },
    )
    kube.put(NAMESPACES, None, {"metadata": {"name": "tasks"}, "status": {"phase": "Active"}})
    page = open_page("alice")
    page.goto("/")
    card = page.locator('[data-quota="alpha:all clouds"]')
    expect(card).to_contain_text("vCPU (tasks and instances)")
    meter = card.locator('meter[aria-label="alpha vCPU (tasks and instances): 2 of 8"]')
    expect(meter).to_have_attribute("value", "25")
    expect(card).to_contain_text("1024 / 4096 MB")
    screenshot(page, "dashboard-quotas")

    page.goto("/clouds/k3s-lab/")
    expect(page.locator("[data-health]")).to_contain_text("Unknown")
    nodes = page.locator('table[data-inventory="nodes"]')
    expect(nodes).to_contain_text("node-1")  # loaded after the page, from the cloud
    expect(nodes).to_contain_text("Ready=True")
    expect(page.locator('table[data-inventory="namespaces"]')).to_contain_text("Active")

    kube.configure(token="rotated")  # the cluster's token was rotated: CloudPivot's no longer works
    page.get_by_role("button", name="Check now").click()
    expect(page.locator(".messages .message.error")).to_contain_text("k3s-lab is failing: ")
    expect(page.locator(".page-head .health")).to_have_text("Failing")
    failing = page.locator("[data-health-message]")
    expect(failing).to_contain_text("Last error:")  # the stored check's words, not just a badge
    expect(failing).to_contain_text("401 Unauthorized")
    expect(page.locator("#inventory-tables")).to_be_attached()  # the inventory has answered too (its own words)
    screenshot(page, "cloud-detail-failing", full_page=True)

    kube.configure(token=TOKEN)  # the connection's token is valid again
    page.get_by_role("button", name="Check now").click()
    expect(page.locator(".message.success")).to_contain_text("k3s-lab answered: Kubernetes v1.")
    expect(page.locator(".page-head .health")).to_have_text("OK")
    expect(page.locator("[data-health-message]")).to_contain_text("everything CloudPivot needs is allowed")
    expect(nodes).to_contain_text("node-1")
    screenshot(page, "cloud-detail", full_page=True)
    assert CloudConnection.objects.get(cloud_id="k3s-lab").health_status == "ok"


def test_the_openstack_cloud_page_shows_its_inventory_and_the_scheduled_health(open_page, os_live, world):
    from django.utils import timezone
    from django_q.models import Schedule

    from clusters.health import check_all

    world.alice.is_staff = True
    world.alice.save()
    Schedule.objects.create(
        name="clouds-health",
        func="clusters.jobs.check_health",
        schedule_type="I",
        minutes=5,
        next_run=timezone.now() + timezone.timedelta(minutes=4),
    )
    check_all()  # what the schedule runs every 5 minutes
    page = open_page("alice")
    page.goto("/clouds/os-dev/")
    expect(page.locator(".page-head .health")).to_have_text("OK")
    expect(page.locator("[data-health-message]")).to_contain_text("everything CloudPivot needs is there")
    expect(page.locator("[data-next-check]")).to_contain_text("every 5 minutes")
    expect(page.locator("[data-next-check]")).to_contain_text("next check in 3 minutes")
    flavors = page.locator('table[data-inventory="flavors"]')
    expect(flavors).to_contain_text("cp.tiny", timeout=60_000)  # loaded after the page, from Nova
    expect(page.locator('table[data-inventory="images"]')).to_contain_text("cp-runner-fake")
    expect(page.locator("#inventory-tables h3")).to_contain_text(["Flavors", "Images", "Networks", "Volumes"])
    assert "placeholder" not in page.content()
    screenshot(page, "cloud-detail-openstack", full_page=True)
    assert not helpers.csrf_problems(page.content())
