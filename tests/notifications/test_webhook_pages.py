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
    assert endpoint.signing_secret.encode() in created.content
    again = alice.get(f"/webhooks/{endpoint.pk}/")
    assert again.status_code == 200 and endpoint.signing_secret.encode() not in again.content


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
    old = endpoint.signing_secret
    rotated = alice.post(act, {"action": "rotate"})
    endpoint.refresh_from_db()
    assert endpoint.signing_secret != old and endpoint.signing_secret.encode() in rotated.content
    assert alice.post(act, {"action": "redeliver", "delivery": "nonsense"}).status_code == 404
    alice.post(act, {"action": "delete"})
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()


def test_the_signing_secret_is_encrypted_at_rest_and_a_key_rotation_keeps_it(endpoint, settings):
    from cryptography.fernet import Fernet
    from django.core.management import call_command
    from django.db import connection

    clear = endpoint.signing_secret
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM notifications_webhookendpoint")
        (stored,) = cursor.fetchone()
    assert clear.startswith("whsec_") and clear not in stored  # a copy of the database alone reveals nothing
    webhooks.webhook_secret_rotate(endpoint=endpoint)
    endpoint.refresh_from_db()
    assert webhooks.signing_secrets(endpoint)[1] == clear  # the old one signs beside the new one for a while

    settings.CLOUDPIVOT_SECRETS_KEY = f"{Fernet.generate_key().decode()},{settings.CLOUDPIVOT_SECRETS_KEY}"
    call_command("rotate_secrets_key", verbosity=0)
    settings.CLOUDPIVOT_SECRETS_KEY = settings.CLOUDPIVOT_SECRETS_KEY.split(",")[0]  # the old key dropped
    endpoint.refresh_from_db()
    assert webhooks.signing_secrets(endpoint)[1] == clear


def test_staff_may_pause_an_endpoint_in_the_admin_but_not_repoint_it(endpoint, world):
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    url = f"/admin/notifications/webhookendpoint/{endpoint.pk}/change/"
    page = client.get(url).content.decode()
    assert 'name="url"' not in page and "http://127.0.0.1:9/hooks" in page  # shown, not editable
    form = {"event_types": '["task.state"]', "description": "", "url": "https://attacker.example/steal"}
    assert client.post(url, form).status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.url == "http://127.0.0.1:9/hooks" and endpoint.is_active is False  # paused (box unticked)
