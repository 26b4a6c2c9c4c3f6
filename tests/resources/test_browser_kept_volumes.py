"""The kept-volumes table on the instances page in headless Chromium (real Daphne): a reclaim refused while a
guest still runs on the disk, with the reason; then reclaimed once it stopped. The loopback cluster plays KubeVirt."""

from __future__ import annotations

import pytest
from django_q.conf import Conf
from playwright.sync_api import expect

from resources.models import KeptVolume, Operation
from tests.clusters.kube_api import DATA_VOLUMES
from tests.resources.kubevirt_world import Worker, create_running, delete_keeping, guest_on, succeeded

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_bob_reclaims_a_kept_disk_from_the_instances_page_once_no_guest_uses_it(kv, api, open_page, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)  # the test's worker threads run the jobs, not the requests
    instance_id, name = create_running(api, kv)
    delete_keeping(api, kv, instance_id, name)
    volume = KeptVolume.objects.get()
    vmi_path = guest_on(kv, f"{name}-root")

    page = open_page("bob")
    page.goto("/instances/")
    row = page.locator(f'#kept-volumes [data-volume-row="{volume.pk}"]')
    expect(row).to_contain_text(f"datavolume/{name}-root")
    expect(row).to_contain_text("5 GB")
    expect(row.get_by_role("link", name="vm1")).to_have_attribute("href", f"/instances/{instance_id}/")
    row.get_by_role("button", name="Reclaim").click()
    expect(page.locator(".message.error")).to_contain_text(
        f"datavolume/{name}-root is still used by VirtualMachineInstance someone-elses-vm"
    )
    assert not Operation.objects.filter(action="volume_reclaim").exists()

    kv.call(lambda: kv.api.system("DELETE", vmi_path))
    row.get_by_role("button", name="Reclaim").click()
    expect(page.locator(".message.success")).to_contain_text(f"Reclaim of datavolume/{name}-root requested")
    expect(row.locator('[data-volume-state="reclaiming"]')).to_be_visible()
    succeeded(Worker(str(Operation.objects.get(action="volume_reclaim").pk)))
    assert f"{name}-root" not in kv.objects(DATA_VOLUMES)
    page.reload()
    expect(page.locator("#kept-volumes")).to_have_count(0)


def test_a_reader_sees_the_kept_disk_but_no_reclaim_button(kv, api, open_page, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)
    instance_id, name = create_running(api, kv)
    delete_keeping(api, kv, instance_id, name)
    page = open_page("rita")
    page.goto("/instances/")
    expect(page.locator("#kept-volumes")).to_contain_text(f"datavolume/{name}-root")
    expect(page.locator("#kept-volumes").get_by_role("button", name="Reclaim")).to_have_count(0)
