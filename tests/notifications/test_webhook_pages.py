"""The webhook pages with Django's test client: the API's permission rule, secrets shown once, bad input."""

from __future__ import annotations

import pytest

from notifications import webhooks
from notifications.models import WebhookEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint(world, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    endpoint, _ = webhooks.webhook_endpoint_create(
        user=world.alice, project="alpha", url="http://127.0.0.1:9/hooks", event_types=["task.state"]
    )
    return endpoint


def test_an_admin_subscribes_and_sees_the_secret_once(world, pages, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    alice = pages("alice")
    assert b"Subscribe a URL" in alice.get("/webhooks/").content
    created = alice.post(
        "/webhooks/new", {"project": "alpha", "url": "http://127.0.0.1:9/hooks", "event_types": "task.state, task.*"}
    )
    assert created.status_code == 201
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.event_types == ["task.state", "task.*"]
    assert endpoint.secret.encode() in created.content
    again = alice.get(f"/webhooks/{endpoint.pk}/")
    assert again.status_code == 200 and endpoint.secret.encode() not in again.content


def test_a_refused_url_is_a_400_naming_the_reason(world, pages):
    response = pages("alice").post("/webhooks/new", {"project": "alpha", "url": "http://127.0.0.1:9/hooks"})
    assert response.status_code == 400
    assert b"WEBHOOK_ALLOW_PRIVATE_TARGETS" in response.content
    assert b'name="url" type="text" inputmode="url" required aria-invalid="true"' in response.content  # the field
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("name", ["bob", "rita"])
def test_members_who_are_not_admins_get_no_controls_and_403_or_404(world, pages, endpoint, name):
    client = pages(name)
    listing = client.get("/webhooks/")
    assert listing.status_code == 200
    assert b"Subscribe a URL" not in listing.content and endpoint.url.encode() not in listing.content
    assert client.post("/webhooks/new", {"project": "alpha", "url": "http://127.0.0.1:9/x"}).status_code == 403
    assert client.get(f"/webhooks/{endpoint.pk}/").status_code == 404
    assert client.post(f"/webhooks/{endpoint.pk}/act/", {"action": "delete"}).status_code == 404
    assert WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()


def test_pause_resume_rotate_and_delete(world, pages, endpoint):
    alice = pages("alice")
    act = f"/webhooks/{endpoint.pk}/act/"
    alice.post(act, {"action": "pause"})
    endpoint.refresh_from_db()
    assert not endpoint.is_active
    alice.post(act, {"action": "resume"})
    endpoint.refresh_from_db()
    assert endpoint.is_active
    old = endpoint.secret
    rotated = alice.post(act, {"action": "rotate"})
    endpoint.refresh_from_db()
    assert endpoint.secret != old and endpoint.secret.encode() in rotated.content
    assert alice.post(act, {"action": "redeliver", "delivery": "nonsense"}).status_code == 404
    alice.post(act, {"action": "delete"})
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
