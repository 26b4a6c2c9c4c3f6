"""Webhooks in the portal, in headless Chromium: alice subscribes a loopback receiver, sees the secret once,
watches deliveries arrive in the log with status and response time, and redelivers one.

The portal's Daphne must allow loopback targets, so this module runs its own (the shared one refuses them);
the test process plays the worker that fans out and posts (notifications.jobs.pump), as in test_webhooks.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from notifications.models import DeliveryState, WebhookDelivery, WebhookEndpoint
from tests import builders, helpers
from tests.notifications.servers import pump_until, received, start_receiver
from tests.plugins.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker, tmp_path_factory, server_logs):
    """Like tests/plugins/servers.py's, with CLOUDPIVOT_WEBHOOK_ALLOW_PRIVATE_TARGETS (the receiver is on loopback)."""
    from types import SimpleNamespace

    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path_factory.mktemp("daphne-runs"))
    env["CLOUDPIVOT_WEBHOOK_ALLOW_PRIVATE_TARGETS"] = "true"
    log = server_logs / "daphne-webhooks.log"
    process = helpers.start_daphne(port=port, env=env, log=log)
    yield SimpleNamespace(url=f"http://127.0.0.1:{port}", port=port, env=env, process=process, log=log)
    helpers.stop_process_group(process)


def test_an_admin_subscribes_sees_deliveries_with_response_times_and_redelivers(open_page, world, settings, tmp_path):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # for the deliveries this process posts
    port = helpers.free_port()
    page = open_page("alice")
    page.get_by_role("link", name="Webhooks").click()
    page.wait_for_url(re.compile(r"/webhooks/$"))
    page.get_by_label("URL", exact=True).fill(f"http://127.0.0.1:{port}/hooks")
    page.get_by_label("Event types").fill("task.state")
    page.get_by_role("button", name="Subscribe").click()
    secret = page.locator("[data-webhook-secret]").inner_text()
    assert secret.startswith("whsec_")
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.event_types == ["task.state"] and endpoint.signing_secret == secret

    log = tmp_path / "received.jsonl"
    receiver = start_receiver(port, secret, log)
    try:
        builders.finished(world.bob)
        pump_until(
            lambda: not WebhookDelivery.objects.exclude(state=DeliveryState.SUCCEEDED).exists() and received(log)
        )
        page.goto(f"/webhooks/{endpoint.pk}/")
        expect(page.locator("[data-webhook-secret]")).to_have_count(0)  # shown once, never again
        rows = page.locator("[data-delivery-row]")
        expect(rows).to_have_count(WebhookDelivery.objects.count())
        first = rows.first
        expect(first.locator("[data-delivery-status]")).to_have_text("204")  # the receiver answers 204 No Content
        expect(first.locator("[data-delivery-ms]")).to_have_text(re.compile(r"^\d+ ms$"))
        expect(first.locator("[data-delivery-attempts]")).to_have_text("1")

        delivery = WebhookDelivery.objects.get(pk=first.get_attribute("data-delivery-row"))
        sent_before = len(received(log))
        first.get_by_role("button", name="Redeliver").click()
        expect(page.get_by_text("will be sent again shortly")).to_be_visible()
        pump_until(lambda: len(received(log)) > sent_before)
        # the delivery log refreshes itself (htmx): the second attempt shows up without a reload
        expect(page.locator(f'[data-delivery-row="{delivery.pk}"] [data-delivery-attempts]')).to_have_text("2")
        screenshot(page, "webhook-deliveries", full_page=True)  # the secret is not on this page any more
    finally:
        helpers.stop_process_group(receiver)
    again = [item for item in received(log) if item["id"] == delivery.webhook_id]
    assert len(again) == 2 and all(item["verified"] for item in again)  # same webhook-id: receivers de-duplicate


def test_a_member_who_is_not_admin_sees_no_controls(open_page, world, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    from notifications import webhooks

    webhooks.webhook_endpoint_create(user=world.alice, project="alpha", url="http://127.0.0.1:9/h", event_types=[])
    page = open_page("bob")
    page.goto("/webhooks/")
    expect(page.locator("[data-no-admin]")).to_be_visible()
    expect(page.get_by_role("button", name="Subscribe")).to_have_count(0)
    expect(page.locator("[data-webhook-row]")).to_have_count(0)
