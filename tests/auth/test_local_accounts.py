"""CLOUDPIVOT_LOCAL_ACCOUNTS: on by default; off closes password login and signup, the admin stays reachable.

Requests go through Django's test client to the real allauth views (the settings are read per request).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db

OIDC_APP = {
    "openid_connect": {
        "APPS": [
            {
                "provider_id": "keycloak",
                "name": "Keycloak",
                "client_id": "cp",
                "secret": "s3cret-value",
                "settings": {"server_url": "http://127.0.0.1:9/realms/x"},
            }
        ]
    }
}


def _logged_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_by_default_the_password_form_works(client, world):
    page = client.get("/accounts/login/")
    assert b'name="password"' in page.content
    response = client.post("/accounts/login/", {"login": "bob", "password": "pw-bob"}, REMOTE_ADDR="192.0.2.31")
    assert response.status_code == 302 and _logged_in(client)


@pytest.fixture
def local_off(settings):
    settings.CLOUDPIVOT_LOCAL_ACCOUNTS = False
    settings.SOCIALACCOUNT_PROVIDERS = OIDC_APP


def test_local_accounts_off_hides_the_password_form_and_shows_the_providers(client, local_off):
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b'name="password"' not in page.content
    assert b"Log in with Keycloak" in page.content
    assert b"s3cret-value" not in page.content


def test_local_accounts_off_refuses_the_right_password(client, world, local_off):
    response = client.post("/accounts/login/", {"login": "bob", "password": "pw-bob"}, REMOTE_ADDR="192.0.2.32")
    assert response.status_code == 200  # the form again, with the reason
    assert b"Password login is switched off" in response.content
    assert not _logged_in(client)


def test_local_accounts_off_refuses_even_a_superuser_on_the_login_page(client, db, local_off):
    get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client.post("/accounts/login/", {"login": "root", "password": "pw-root"}, REMOTE_ADDR="192.0.2.33")
    assert not _logged_in(client)


def test_local_accounts_off_closes_signup(client, db, local_off):
    page = client.get("/accounts/signup/")
    assert b'name="password1"' not in page.content
    assert b"the sign up is currently closed" in page.content
    client.post(
        "/accounts/signup/",
        {"email": "eve@example.org", "username": "eve", "password1": "a-Long-pass-42", "password2": "a-Long-pass-42"},
    )
    assert not get_user_model().objects.filter(username="eve").exists()


def test_signup_is_open_with_local_accounts_on(client, db):
    client.post(
        "/accounts/signup/",
        {"email": "eve@example.org", "username": "eve", "password1": "a-Long-pass-42", "password2": "a-Long-pass-42"},
    )
    eve = get_user_model().objects.get(username="eve")
    assert not eve.memberships.exists()  # a new user joins no project by themselves


def test_local_accounts_off_a_superuser_still_logs_in_to_the_admin(client, world, local_off):
    get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    response = client.post("/admin/login/?next=/admin/", {"username": "root", "password": "pw-root"})
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/accounts/project/").status_code == 200


def test_local_accounts_off_a_staff_user_who_is_not_superuser_cannot_log_in_to_the_admin(client, world, local_off):
    world.alice.is_staff = True
    world.alice.save(update_fields=["is_staff"])
    response = client.post("/admin/login/?next=/admin/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 200 and not _logged_in(client)


def test_local_accounts_on_a_staff_user_logs_in_to_the_admin(client, world):
    world.alice.is_staff = True
    world.alice.save(update_fields=["is_staff"])
    response = client.post("/admin/login/?next=/admin/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302 and _logged_in(client)


def test_no_provider_and_local_accounts_off_says_so(client, db, settings):
    settings.CLOUDPIVOT_LOCAL_ACCOUNTS = False
    settings.SOCIALACCOUNT_PROVIDERS = {}
    page = client.get("/accounts/login/")
    assert b"No login provider is configured yet" in page.content


def test_the_login_page_shows_a_button_per_provider(client, db, settings):
    settings.SOCIALACCOUNT_PROVIDERS = {
        **OIDC_APP,
        "github": {"APPS": [{"client_id": "gh", "secret": "gh-secret", "name": "GitHub"}]},
        "gitlab": {"APPS": [{"client_id": "gl", "secret": "gl-secret", "name": "GitLab"}]},
        "gitea": {"APPS": [{"client_id": "gt", "secret": "gt-secret", "name": "Gitea"}]},
    }
    page = client.get("/accounts/login/").content.decode()
    for name, url in [
        ("Keycloak", "/accounts/oidc/keycloak/login/"),
        ("GitHub", "/accounts/github/login/"),
        ("GitLab", "/accounts/gitlab/login/"),
        ("Gitea", "/accounts/gitea/login/"),
    ]:
        assert f"Log in with {name}" in page
        assert f'action="{url}?process=login"' in page
    assert "secret" not in page.lower()
    assert 'name="password"' in page  # local accounts stay on beside the providers


def test_home_tells_a_user_without_a_project_to_ask_an_admin(client, world):
    newcomer = get_user_model().objects.create_user("newcomer", "n@example.org", "pw")
    client.force_login(newcomer)
    page = client.get("/")
    assert page.status_code == 200
    assert b"You are not a member of any project yet" in page.content


def test_home_of_a_member_has_no_such_notice(client, world):
    client.force_login(world.rita)
    assert b"You are not a member of any project yet" not in client.get("/").content


def test_local_accounts_off_sends_no_password_reset_mail(client, world, local_off, mailoutbox):
    response = client.post("/accounts/password/reset/", {"email": "bob@example.org"})
    assert response.status_code == 302  # the same answer as for any address
    assert mailoutbox == []


def test_local_accounts_on_sends_the_password_reset_mail(client, world, mailoutbox):
    client.post("/accounts/password/reset/", {"email": "bob@example.org"})
    assert [message.to for message in mailoutbox] == [["bob@example.org"]]


def test_local_accounts_off_api_tokens_still_work(api, local_off):
    assert api("bob").get("/api/v1/projects").status_code == 200


def test_a_provider_added_in_the_admin_gets_its_button(client, db, settings):
    settings.SOCIALACCOUNT_PROVIDERS = {}
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client.force_login(root)
    assert client.get("/admin/socialaccount/socialapp/add/").status_code == 200
    response = client.post(
        "/admin/socialaccount/socialapp/add/",
        {
            "provider": "openid_connect",
            "provider_id": "corp",
            "name": "Corp SSO",
            "client_id": "cloudpivot",
            "secret": "db-secret",
            "key": "",
            "settings": '{"server_url": "https://sso.example.org/realms/corp"}',
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    client.logout()
    page = client.get("/accounts/login/").content.decode()
    assert "Log in with Corp SSO" in page and 'action="/accounts/oidc/corp/login/?process=login"' in page
    assert "db-secret" not in page
