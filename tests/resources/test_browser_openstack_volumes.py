"""The kept-volumes table on the instances page in headless Chromium (real Daphne) against the development
OpenStack with Cinder: a root volume kept by a delete is shown with its size, a reader gets no Reclaim button,
and bob's Reclaim deletes it in Cinder (the admin's openstacksdk read) and frees its GB of the volume quota.

Daphne only queues the reclaim job; the test runs it as a worker would.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from cloudpivot.accounts.models import Quota
from resources import jobs
from resources.models import KeptVolume, Operation
from tests.resources.openstack_support import act, running_on_a_volume

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

PAGE_TIMEOUT_MS = 60_000  # the machine may be loaded; every wait is on a condition


def fit_outcome(api) -> str:
    body = {"name": "vm2", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    response = api("bob").post("/api/v1/instances?dry_run=true", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()["outcome"]


def test_bob_reclaims_a_kept_cinder_volume_from_the_instances_page(os_volumes, api, open_page, world):
    Quota.objects.create(project=world.alpha, max_volume_gb=1)
    conn = os_volumes.conn
    instance, volume = running_on_a_volume(api, os_volumes)
    assert act(api, str(instance.pk), action="delete", volumes="keep")["result"]["kept"] == [volume.id]
    assert conn.block_storage.get_volume(volume.id).status == "available"
    kept = KeptVolume.objects.get()
    assert fit_outcome(api) == "refused_now"  # the kept 1 GB fills alpha's volume quota

    reader = open_page("rita")
    reader.set_default_timeout(PAGE_TIMEOUT_MS)
    reader.goto("/instances/")
    expect(reader.locator(f'#kept-volumes [data-volume-row="{kept.pk}"]')).to_contain_text(volume.id)
    expect(reader.locator("#kept-volumes").get_by_role("button", name="Reclaim")).to_have_count(0)

    page = open_page("bob")
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto("/instances/")
    row = page.locator(f'#kept-volumes [data-volume-row="{kept.pk}"]')
    expect(row).to_contain_text(volume.id)
    expect(row).to_contain_text("1 GB")
    expect(row.get_by_role("link", name="vm1")).to_have_attribute("href", f"/instances/{instance.pk}/")
    row.get_by_role("button", name="Reclaim").click()  # open_page accepts the confirm dialog
    expect(page.locator(".message.success")).to_contain_text(f"Reclaim of {volume.id} requested")
    expect(row.locator('[data-volume-state="reclaiming"]')).to_be_visible()

    operation = Operation.objects.get(action="volume_reclaim")
    assert jobs.run_operation(str(operation.pk)) == "succeeded", Operation.objects.get(pk=operation.pk).error_message
    operation.refresh_from_db()
    assert operation.result["reclaimed"] == "deleted" and operation.result["size_gb"] == 1
    assert conn.block_storage.find_volume(volume.id, ignore_missing=True) is None  # Cinder: gone
    page.reload()
    expect(page.locator("#kept-volumes")).to_have_count(0)
    assert api("bob").get("/api/v1/volumes").json()["results"] == []
    (reclaimed,) = api("bob").get("/api/v1/volumes?state=reclaimed").json()["results"]
    assert reclaimed["ref"] == volume.id
    assert fit_outcome(api) == "starts_now"  # the GB are free again
