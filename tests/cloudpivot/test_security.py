"""Security basics: production checks, CSRF for sessions, login rate limits, a valid API schema."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.test import Client

from tests import helpers
from tests.builders import hello_spec


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)} | env
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=helpers.BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.e2e
def test_production_settings_pass_the_deploy_checks():
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        "--settings",
        "cloudpivot.settings.prod",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="cloudpivot.example.org",
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
def test_the_openapi_schema_is_valid_without_warnings(tmp_path):
    result = manage(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--file",
        str(tmp_path / "schema.yaml"),
        DJANGO_SETTINGS_MODULE="cloudpivot.settings.test",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "/api/v1/tasks/{id}/cancel" in (tmp_path / "schema.yaml").read_text()


def test_a_session_write_needs_the_csrf_token(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.bob)
    response = client.post("/api/v1/tasks", data=hello_spec(), content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["message"]


def test_repeated_failed_logins_are_rate_limited(client, db):
    from django.contrib.auth import get_user_model

    # A user and a client address of its own (a documentation address in REMOTE_ADDR, no traffic): the throttle
    # outlives the test in the cache and must not lock out the world's users or the other tests' address.
    get_user_model().objects.create_user("mallory", "mallory@example.org", "pw-mallory")
    for i in range(6):
        client.post("/accounts/login/", {"login": "mallory", "password": f"wrong-{i}"}, REMOTE_ADDR="192.0.2.7")
    # Even the right password is refused for a while: guessing is throttled per account.
    response = client.post("/accounts/login/", {"login": "mallory", "password": "pw-mallory"}, REMOTE_ADDR="192.0.2.7")
    assert b"Too many failed login attempts" in response.content
    assert "_auth_user_id" not in client.session
