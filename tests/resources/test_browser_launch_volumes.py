"""Extra volumes from the launch form in headless Chromium against the live Daphne and the dev OpenStack: a size
that is no number is refused next to the field, then the instance launched with "2:data" shows its volume on its
page and runs with a 2 GB Cinder volume attached."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from resources.models import Instance

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_bob_launches_an_instance_with_a_data_volume_and_sees_it_on_its_page(
    os_instances, open_page, operations_worker
):
    page = open_page("bob")
    page.goto("/instances/new/")
    page.get_by_label("Name").fill("with-data")
    page.get_by_label("Image").select_option(label="cp-runner-fake")
    volumes = page.get_by_label("Extra volumes")
    volumes.fill("2:data, lots")
    page.get_by_role("button", name="Launch").click()
    errors = page.locator("#field-volumes .field-errors")
    expect(errors).to_contain_text("volume 2: 'lots' is not a size in GB", timeout=30_000)
    expect(page.get_by_label("Extra volumes")).to_have_attribute("aria-invalid", "true")
    assert not Instance.objects.exists()

    page.get_by_label("Extra volumes").fill("2:data")
    page.get_by_label("Image").select_option(label="cp-runner-fake")
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(re.compile(r"/instances/[0-9a-f-]{36}/$"), timeout=60_000)
    expect(page.locator("#instance-volumes")).to_have_text("data 2 GB")
    expect(page.locator("#instance-status")).to_have_text("Running", timeout=90_000)
    instance = Instance.objects.get()
    assert instance.volumes == [{"name": "data", "size_gb": 2}]
    conn = os_instances.conn
    (attached,) = conn.compute.get_server(instance.server_id).attached_volumes
    volume = conn.block_storage.get_volume(attached["id"])
    assert (volume.size, volume.status) == (2, "in-use")
