"""The instance pages in headless Chromium against a real Daphne, with a real server on the dev OpenStack.

The test process plays the worker: a thread runs the Operations the pages asked for (the Daphne only
queues them), and the detail page shows each step by itself (it polls its live panel).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from resources.models import Operation
from resources.services import instance_create
from tests.plugins.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_bob_drives_his_instance_through_every_action_from_its_page(
    os_instances,
    open_page,
    operations_worker,
    snapshot_filler,
):
    world = os_instances.world
    data = {"name": "web-vm", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    created, _ = instance_create(user=world.bob, data=data)
    instance_id = str(created.instance_id)
    page = open_page("bob")
    page.goto("/instances/")
    row = page.locator(f'[data-instance-row="{instance_id}"]')
    row_status = row.locator("[data-instance-status]")
    for _ in range(60):  # the list does not poll: reload until the create (run inline or by the worker) is done
        if row_status.text_content() == "Running":
            break
        page.wait_for_timeout(2_000)
        page.reload()
    expect(row_status).to_have_text("Running")
    row.get_by_role("link").click()
    page.wait_for_url(re.compile(rf"/instances/{instance_id}/$"))
    status = page.locator("#instance-status")
    expect(status).to_have_text("Running")

    page.get_by_role("button", name="Stop", exact=True).click()
    expect(status).to_have_text("Stopped", timeout=60_000)
    stop = page.locator('#instance-operations [data-action="stop"]')
    expect(stop).to_have_attribute("data-state", "succeeded")
    expect(page.get_by_role("button", name="Start", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Pause", exact=True)).to_have_count(0)

    page.get_by_role("button", name="Start", exact=True).click()
    expect(status).to_have_text("Running", timeout=60_000)
    expect(page.locator('#instance-operations [data-action="start"]')).to_have_attribute("data-state", "succeeded")
    screenshot(page, "instance-detail", full_page=True)
    assert os_instances.conn.compute.get_server(Operation.objects.get(pk=created.pk).result["server_id"]).status == (
        "ACTIVE"
    )
    # rita (reader) sees the page but no buttons
    reader = open_page("rita")
    reader.goto(f"/instances/{instance_id}/")
    expect(reader.locator("#instance-status")).to_have_text("Running")
    expect(reader.locator("#instance-actions")).to_have_count(0)

    def act(label: str, action: str, then: str, *, button=None) -> None:
        """Click, then see the status the post-condition gives and the operation succeeded, on the page."""
        done_before = page.locator(f'#instance-operations [data-action="{action}"][data-state="succeeded"]').count()
        (button or page.get_by_role("button", name=label, exact=True)).click()
        expect(status).to_have_text(then, timeout=60_000)
        expect(page.locator(f'#instance-operations [data-action="{action}"][data-state="succeeded"]')).to_have_count(
            done_before + 1, timeout=60_000
        )

    act("Reboot", "reboot", "Running")
    act("Hard reboot", "reboot", "Running")
    act("Pause", "pause", "Paused")
    act("Unpause", "unpause", "Running")
    act("Suspend", "suspend", "Suspended")
    act("Resume", "resume", "Running")
    act("Snapshot", "snapshot", "Running")
    snapshot_row = page.locator("#instance-snapshots tbody tr")
    expect(snapshot_row).to_have_count(1)
    expect(snapshot_row.locator("td").nth(1)).to_have_text("available", timeout=60_000)
    copy = open_page("bob")  # "Launch a copy" opens the launch form with the snapshot as the image
    copy.goto(snapshot_row.get_by_role("link", name="Launch a copy").get_attribute("href"))
    expect(copy.get_by_label("Cloud")).to_have_value("os-dev")
    expect(copy.get_by_label("Image")).to_have_value(f"snapshot:{snapshot_row.get_attribute('data-snapshot-row')}")
    act("Restore", "restore", "Running", button=snapshot_row.get_by_role("button", name="Restore"))
    act("Delete (keep volumes)", "delete", "Deleted")  # the confirm dialog is accepted (open_page)
    server_id = Operation.objects.get(pk=created.pk).result["server_id"]
    gone = os_instances.conn.compute.find_server(server_id, ignore_missing=True)
    assert gone is None or gone.status == "DELETED"  # Nova shows DELETED for a moment, then nothing
