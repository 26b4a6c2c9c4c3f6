"""Security basics: production checks, CSRF for sessions, login rate limits, a valid API schema."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
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
        CLOUDPIVOT_SECRETS_KEY=Fernet.generate_key().decode(),
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


@pytest.mark.e2e
def test_production_settings_refuse_to_start_without_a_secret_key():
    result = manage("check", "--settings", "cloudpivot.settings.prod", DJANGO_ALLOWED_HOSTS="cloudpivot.example.org")
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) must be set" in result.stderr
    assert "Traceback" not in result.stderr.split("ImproperlyConfigured")[-1]


@pytest.mark.e2e
@pytest.mark.parametrize(("value", "words"), [("", ""), ("not-a-key", " (key 1 is not a Fernet key")])
def test_production_settings_refuse_to_start_without_a_usable_secrets_key(value, words):
    result = manage(
        "check",
        "--settings",
        "cloudpivot.settings.prod",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="cloudpivot.example.org",
        CLOUDPIVOT_SECRETS_KEY=value,
    )
    assert result.returncode != 0
    assert (
        f"CLOUDPIVOT_SECRETS_KEY (or CLOUDPIVOT_SECRETS_KEY_FILE) must be set with the production settings{words}"
        in (result.stderr)
    )


@pytest.mark.e2e
def test_production_closes_self_registration_by_default():
    code = "from django.conf import settings; print(settings.CLOUDPIVOT_SIGNUP_OPEN)"
    key = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "CLOUDPIVOT_SECRETS_KEY": Fernet.generate_key().decode(),
        "DJANGO_ALLOWED_HOSTS": "x.example.org",
    }
    prod = manage("shell", "-c", code, "--settings", "cloudpivot.settings.prod", **key)
    assert prod.stdout.split()[-1] == "False", prod.stderr
    opened = manage("shell", "-c", code, "--settings", "cloudpivot.settings.prod", CLOUDPIVOT_SIGNUP_OPEN="true", **key)
    assert opened.stdout.split()[-1] == "True", opened.stderr


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("redis", "refused"),
    [
        ("redis://cloudpivot-redis:6379/0", True),
        ("redis://:s3cret@cloudpivot-redis:6379/0", False),
        ("redis://127.0.0.1:6379/0", False),
        ("unix:///run/redis/redis.sock", False),
    ],
)
def test_production_refuses_a_redis_across_the_network_without_a_password(redis, refused):
    result = manage(
        "check",
        "--settings",
        "cloudpivot.settings.prod",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        CLOUDPIVOT_SECRETS_KEY=Fernet.generate_key().decode(),
        DJANGO_ALLOWED_HOSTS="x.example.org",
        REDIS_URL=redis,
    )
    assert ("names cloudpivot-redis without a password" in result.stderr) is refused, result.stderr[-500:]
    assert (result.returncode != 0) is refused, result.stderr[-500:]


def test_a_closed_signup_refuses_new_accounts(client, db, settings):
    settings.CLOUDPIVOT_SIGNUP_OPEN = False
    form = {"email": "eve@example.org", "username": "eve", "password1": "a-Long-pass-1", "password2": "a-Long-pass-1"}
    client.post("/accounts/signup/", form)
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.filter(username="eve").exists()
    settings.CLOUDPIVOT_SIGNUP_OPEN = True
    client.post("/accounts/signup/", form)
    assert get_user_model().objects.filter(username="eve").exists()


def test_pages_and_api_carry_a_strict_content_security_policy(client, world):
    client.force_login(world.bob)
    for path in ("/", "/tasks/", "/api/v1/tasks", "/accounts/login/"):
        policy = client.get(path)["Content-Security-Policy"]
        assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy, path
    assert "'unsafe-inline'" in client.get("/api/docs/")["Content-Security-Policy"]


def test_bootstrap_prints_the_admin_password_only_when_it_creates_it(db, settings, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    settings.VAR_DIR = tmp_path
    first, second = StringIO(), StringIO()
    call_command("bootstrap_demo", stdout=first)
    call_command("bootstrap_demo", stdout=second)
    assert "password: " in first.getvalue()
    assert "password: " not in second.getvalue() and "admin-password" in second.getvalue()


@pytest.mark.e2e
def test_var_and_the_database_files_are_private(tmp_path):
    import stat

    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    # The embedded default (SQLite in var/) whatever this test run uses: no DATABASE_URL, no REDIS_URL.
    unset = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")
    embedded = {key: value for key, value in os.environ.items() if key not in unset}
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=helpers.BASE_DIR,
        env=embedded | {"CLOUDPIVOT_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(var.stat().st_mode) == 0o700
    for name in ("cloudpivot.sqlite3", "cloudpivot.sqlite3-wal", "cloudpivot.sqlite3-shm", "secret_key"):
        if (var / name).exists() or name == "cloudpivot.sqlite3":
            assert stat.S_IMODE((var / name).stat().st_mode) == 0o600, name
