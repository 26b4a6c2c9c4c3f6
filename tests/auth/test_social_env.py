"""Login providers from the environment (cloudpivot/social_env.py), and their secrets kept out of error pages."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.views.debug import SafeExceptionReporterFilter

from cloudpivot.social_env import providers_from_env


def _env(**values):
    return lambda name: values.get(name, "")


def test_no_variables_no_provider_apps():
    providers = providers_from_env(_env())
    assert all("APPS" not in config for config in providers.values())


def test_the_single_oidc_provider_variables():
    providers = providers_from_env(
        _env(
            CLOUDPIVOT_OIDC_SERVER_URL="https://sso.example.org/realms/lab",
            CLOUDPIVOT_OIDC_CLIENT_ID="cloudpivot",
            CLOUDPIVOT_OIDC_CLIENT_SECRET="s3cret",
            CLOUDPIVOT_OIDC_NAME="Lab SSO",
        )
    )
    assert providers["openid_connect"]["APPS"] == [
        {
            "provider_id": "oidc",
            "name": "Lab SSO",
            "client_id": "cloudpivot",
            "secret": "s3cret",
            "settings": {"server_url": "https://sso.example.org/realms/lab"},
        }
    ]
    assert providers["openid_connect"]["OAUTH_PKCE_ENABLED"] is True


def test_a_json_list_of_providers():
    listed = [
        {"provider": "github", "client_id": "gh", "secret": "gh-s"},
        {"provider": "gitlab", "client_id": "gl", "secret": "gl-s", "url": "https://gitlab.example.org/"},
        {"provider": "gitea", "client_id": "gt", "secret": "gt-s", "url": "https://gitea.example.org"},
        {"provider": "openid_connect", "id": "kc", "name": "Keycloak", "client_id": "c", "secret": "s",
         "server_url": "https://kc.example.org/realms/a", "scope": ["openid", "profile", "email", "groups"]},
    ]  # fmt: skip
    providers = providers_from_env(_env(CLOUDPIVOT_AUTH_PROVIDERS=json.dumps(listed)))
    assert providers["github"]["APPS"][0]["client_id"] == "gh"
    assert providers["gitlab"]["GITLAB_URL"] == "https://gitlab.example.org"
    assert providers["gitea"]["GITEA_URL"] == "https://gitea.example.org"
    oidc = providers["openid_connect"]["APPS"][0]
    assert oidc["provider_id"] == "kc" and oidc["settings"]["scope"] == ["openid", "profile", "email", "groups"]


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"provider": "github"}', "must be a JSON list of objects"),
        ('[{"provider": "facebook", "client_id": "a", "secret": "b"}]', "'provider' must be one of"),
        ('[{"provider": "github", "client_id": "a"}]', "#1 \\(github\\): 'secret' is required"),
        ('[{"provider": "openid_connect", "client_id": "a", "secret": "b"}]', "'id' and 'server_url' are required"),
    ],
)
def test_a_bad_provider_list_names_the_problem(listed, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        providers_from_env(_env(CLOUDPIVOT_AUTH_PROVIDERS=listed))


def test_an_error_never_shows_the_secret():
    listed = json.dumps([{"provider": "gitlab", "secret": "do-not-print-me"}])
    with pytest.raises(ImproperlyConfigured) as error:
        providers_from_env(_env(CLOUDPIVOT_AUTH_PROVIDERS=listed))
    assert "do-not-print-me" not in str(error.value)


def test_the_debug_error_page_hides_client_secrets(settings):
    settings.SOCIALACCOUNT_PROVIDERS = providers_from_env(
        _env(
            CLOUDPIVOT_OIDC_SERVER_URL="https://sso.example.org",
            CLOUDPIVOT_OIDC_CLIENT_ID="cloudpivot",
            CLOUDPIVOT_OIDC_CLIENT_SECRET="do-not-print-me",
            CLOUDPIVOT_AUTH_PROVIDERS=json.dumps([{"provider": "github", "client_id": "gh", "secret": "nor-me"}]),
        )
    )
    shown = repr(SafeExceptionReporterFilter().get_safe_settings()["SOCIALACCOUNT_PROVIDERS"])
    assert "do-not-print-me" not in shown and "nor-me" not in shown
    assert "cloudpivot" in shown  # the rest stays visible for debugging


def test_the_secret_can_come_from_a_file(tmp_path, monkeypatch):
    from cloudpivot.env import envsecret

    secret_file = tmp_path / "secret"
    secret_file.write_text("from-a-file\n")
    monkeypatch.setenv("CLOUDPIVOT_OIDC_SERVER_URL", "https://sso.example.org")
    monkeypatch.setenv("CLOUDPIVOT_OIDC_CLIENT_ID", "cloudpivot")
    monkeypatch.setenv("CLOUDPIVOT_OIDC_CLIENT_SECRET_FILE", str(secret_file))
    assert providers_from_env(envsecret)["openid_connect"]["APPS"][0]["secret"] == "from-a-file"
