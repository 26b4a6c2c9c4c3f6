"""The personal settings page with Django's test client: API tokens (made, shown once, listed, revoked) and
email notifications; each user sees and changes only their own."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from cloudpivot.accounts.models import ApiToken
from notifications.models import EmailPreference, TaskEndMail

pytestmark = pytest.mark.django_db


def test_anonymous_users_are_sent_to_log_in(pages):
    for url in ("/settings/", "/projects/", "/projects/alpha/"):
        response = pages(None).get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")
    assert pages(None).post("/settings/tokens/", {"name": "x"}).status_code == 302
    assert not ApiToken.objects.filter(name="x").exists()


def test_the_page_lists_only_my_tokens_with_their_dates(pages, world):
    used = ApiToken.objects.get(user=world.bob, name="test")
    used.last_used_at = timezone.now()
    used.save()
    response = pages("bob").get("/settings/")
    assert response.status_code == 200 and "accounts/settings.html" in [t.name for t in response.templates]
    assert [t.name for t in response.context["tokens"]] == ["test"]
    content = response.content.decode()
    assert f'data-token-row="{used.pk}"' in content and f"{used.hint}…" in content
    assert "0\xa0minutes ago" in content  # last used
    alices = ApiToken.objects.get(user=world.alice)
    assert f'data-token-row="{alices.pk}"' not in content


def test_a_created_token_is_shown_once_and_works_against_the_api(pages, world):
    bob = pages("bob")
    created = bob.post("/settings/tokens/", {"name": "laptop cli", "expires_in_days": "30"})
    assert created.status_code == 201
    assert "no-store" in created["Cache-Control"]
    plain = re.search(r"<code data-new-token>(cpt_[^<]+)</code>", created.content.decode()).group(1)
    token = ApiToken.objects.get(user=world.bob, name="laptop cli")
    assert 29 <= (token.expires_at - timezone.now()).days <= 30
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert api.get("/api/v1/projects").status_code == 200
    again = bob.get("/settings/")
    assert plain not in again.content.decode() and token.hint in again.content.decode()


def test_a_token_without_expiry_never_expires(pages, world):
    assert pages("bob").post("/settings/tokens/", {"name": "ci", "expires_in_days": ""}).status_code == 201
    assert ApiToken.objects.get(user=world.bob, name="ci").expires_at is None


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"name": "", "expires_in_days": "3"}, "name", "This field is required."),
        ({"name": "x", "expires_in_days": "0"}, "expires_in_days", "greater than or equal to 1"),
        ({"name": "x", "expires_in_days": "soon"}, "expires_in_days", "Enter a whole number."),
        ({"name": "x" * 101}, "name", "at most 100 characters"),
    ],
)
def test_bad_token_input_is_shown_next_to_the_field(pages, world, data, field, words):
    response = pages("bob").post("/settings/tokens/", data)
    assert response.status_code == 400
    content = response.content.decode()
    errors = re.search(rf'<div class="field-errors" id="id_{field}_errors">(.*?)</div>', content, re.S)
    assert errors and words in errors.group(1)
    assert 'aria-invalid="true"' in content
    assert ApiToken.objects.filter(user=world.bob).count() == 1  # only the world's


def test_revoking_a_token_refuses_it_from_then_on(pages, world):
    bob = pages("bob")
    created = bob.post("/settings/tokens/", {"name": "short-lived"})
    plain = re.search(r"<code data-new-token>(cpt_[^<]+)</code>", created.content.decode()).group(1)
    token = ApiToken.objects.get(name="short-lived")
    response = bob.post(f"/settings/tokens/{token.pk}/revoke", follow=True)
    assert response.status_code == 200 and b"revoked: it is refused from now on" in response.content
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert f'data-token-row="{token.pk}"' in response.content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert api.get("/api/v1/projects").status_code == 401


def test_another_users_token_cannot_be_revoked(pages, world):
    alices = ApiToken.objects.get(user=world.alice)
    assert pages("bob").post(f"/settings/tokens/{alices.pk}/revoke").status_code == 404
    alices.refresh_from_db()
    assert alices.revoked_at is None
    assert pages("bob").get(f"/settings/tokens/{alices.pk}/revoke").status_code == 405


def test_email_preferences_are_saved_for_me_only(pages, world):
    page = pages("bob").get("/settings/")
    assert page.context["email_form"]["task_end"].value() == TaskEndMail.NONE
    response = pages("bob").post("/settings/notifications", {"task_end": "failures", "operation_failed": "on"})
    assert response.status_code == 302 and response["Location"] == "/settings/"
    preference = EmailPreference.objects.get(user=world.bob)
    assert (preference.task_end, preference.operation_failed) == ("failures", True)
    assert not EmailPreference.objects.filter(user=world.alice).exists()
    shown = pages("bob").get("/settings/")
    assert shown.context["email_form"]["task_end"].value() == "failures"
    # the API reads the same preference
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {world.tokens['bob']}")
    assert api.get("/api/v1/email-preferences").json()["task_end"] == "failures"


def test_a_bad_email_preference_is_shown_next_to_the_field(pages, world):
    response = pages("bob").post("/settings/notifications", {"task_end": "sometimes"})
    assert response.status_code == 400
    assert re.search(r'id="id_task_end_errors">.*Select a valid choice', response.content.decode(), re.S)
    assert not EmailPreference.objects.filter(user=world.bob).exists()


def test_a_user_without_email_is_told_no_mail_can_be_sent(pages, world):
    world.bob.email = ""
    world.bob.save()
    assert b"data-no-email" in pages("bob").get("/settings/").content
    assert b"data-no-email" not in pages("alice").get("/settings/").content
