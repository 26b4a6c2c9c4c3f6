"""The instance page in headless Chromium (real Daphne) after a KubeVirt guest shut itself down: the reason and
the "guest" event on the timeline, read by the user; the loopback cluster plays KubeVirt."""

from __future__ import annotations

import pytest
from django_q.conf import Conf
from playwright.sync_api import expect

from resources.services import instances_refresh
from tests.resources.kubevirt_world import create_running

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_bob_reads_on_his_instance_page_that_the_guest_stopped_itself(kv, api, open_page, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)  # the test's worker thread runs the create, not the request
    instance_id, name = create_running(api, kv)
    kv.guest_shutdown(name)
    instances_refresh()
    page = open_page("bob")
    page.goto(f"/instances/{instance_id}/")
    expect(page.locator("#instance-status")).to_have_text("Stopped")
    expect(page.locator("#instance-reason")).to_contain_text("the guest stopped itself (KubeVirt: Stopped")
    event = page.locator('#instance-operations [data-action="stop"]')
    expect(event).to_have_attribute("data-state", "succeeded")
    expect(event.locator(".event-message")).to_have_text("succeeded · guest · the guest stopped itself")
    expect(page.get_by_role("button", name="Start", exact=True)).to_be_visible()
