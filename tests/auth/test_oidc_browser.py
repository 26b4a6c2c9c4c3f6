"""A real OpenID Connect login in headless Chromium: CloudPivot's login page → the provider → back, logged in.

The provider is tests/oidc_provider (django-oauth-toolkit) on loopback; CloudPivot's Daphne knows it
from CLOUDPIVOT_OIDC_* and maps its `groups` claim with conftest.GROUP_MAP. Nothing is faked: the
browser fills the provider's login form and consents, allauth exchanges the code, fetches userinfo
and checks the ID token.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from cloudpivot.accounts.models import AuditEntry, Membership, Project, Role

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def oidc_login(browser, oidc_provider, oidc_daphne, world):
    """oidc_login("olga", groups=[...]) → a page logged in to CloudPivot through the provider, in a fresh context."""
    contexts = []

    def login(username: str, *, groups: list[str]):
        password = f"idp-pw-{username}"
        oidc_provider.provision(
            redirect_uri=oidc_daphne.redirect_uri,
            client_secret=oidc_daphne.client_secret,
            username=username,
            password=password,
            groups=groups,
        )
        context = browser.new_context(base_url=oidc_daphne.url)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto("/")
        assert "/accounts/login/" in page.url  # the dashboard sent us to log in first
        page.get_by_role("button", name="Log in with Test IdP").click()
        page.wait_for_url(re.compile(re.escape(oidc_provider.url) + r"/login/"))
        page.get_by_label("Provider username").fill(username)
        page.get_by_label("Provider password").fill(password)
        page.get_by_role("button", name="Sign in to the provider").click()
        # The provider's consent page; allauth's callback then lands us on the dashboard.
        page.get_by_role("button", name="Authorize").click()
        page.wait_for_url(oidc_daphne.url + "/", timeout=30_000)
        expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
        return page

    yield login
    for context in contexts:
        context.close()


def _roles(username: str) -> dict[str, str]:
    user = get_user_model().objects.get(username=username)
    return dict(Membership.objects.filter(user=user).values_list("project__slug", "role"))


def test_first_login_creates_the_user_with_the_granted_memberships_and_a_second_login_follows_the_groups(
    oidc_login, world
):
    page = oidc_login("olga", groups=["cp-alpha-admins", "cp-beta", "not-in-the-map"])

    olga = get_user_model().objects.get(username="olga")
    assert olga.email == "olga@idp.example.org"
    assert not olga.has_usable_password()
    assert _roles("olga") == {"alpha": Role.ADMIN, "beta": Role.SUBMITTER}
    expect(page.locator("#no-project")).to_have_count(0)
    grants = AuditEntry.objects.filter(actor=olga, action="accounts:membership-grant").order_by("object_ref")
    assert [(e.object_ref, e.details["role_after"], e.via) for e in grants] == [
        ("alpha:olga", "admin", "login"),
        ("beta:olga", "submitter", "login"),
    ]

    # An admin adds olga by hand to a project the map does not name: logins never touch it.
    gamma = Project.objects.create(slug="gamma", name="Gamma")
    Membership.objects.create(project=gamma, user=olga, role=Role.READER)

    # In the provider, olga moves from the admins to the readers of alpha and leaves beta.
    oidc_login("olga", groups=["cp-alpha"])
    assert _roles("olga") == {"alpha": Role.READER, "gamma": Role.READER}
    assert get_user_model().objects.filter(username__startswith="olga").count() == 1  # the same user again
    later = AuditEntry.objects.filter(
        actor=olga, action__in=["accounts:membership-change", "accounts:membership-revoke"]
    )
    assert sorted((e.action, e.object_ref, e.details["role_before"], e.details["role_after"]) for e in later) == [
        ("accounts:membership-change", "alpha:olga", "admin", "reader"),
        ("accounts:membership-revoke", "beta:olga", "submitter", None),
    ]


def test_a_first_login_without_granting_groups_lands_in_no_project(oidc_login, world):
    page = oidc_login("nora", groups=[])

    assert _roles("nora") == {}
    expect(page.locator("#no-project")).to_contain_text("You are not a member of any project yet")
    expect(page.locator("#no-project")).to_contain_text("nora")


def test_cancelling_at_the_provider_comes_back_logged_out_and_creates_nobody(
    browser, oidc_provider, oidc_daphne, world
):
    oidc_provider.provision(
        redirect_uri=oidc_daphne.redirect_uri,
        client_secret=oidc_daphne.client_secret,
        username="pat",
        password="idp-pw-pat",
        groups=["cp-alpha-admins"],
    )
    context = browser.new_context(base_url=oidc_daphne.url)
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto("/accounts/login/")
        page.get_by_role("button", name="Log in with Test IdP").click()
        page.get_by_label("Provider username").fill("pat")
        page.get_by_label("Provider password").fill("idp-pw-pat")
        page.get_by_role("button", name="Sign in to the provider").click()
        page.get_by_role("button", name="Cancel").click()
        page.wait_for_url(re.compile(re.escape(oidc_daphne.url) + "/accounts/"))
        expect(page.get_by_role("heading", name=re.compile("Login Cancelled", re.I))).to_be_visible()
        assert page.goto("/").url.startswith(oidc_daphne.url + "/accounts/login/")
    finally:
        context.close()
    assert not get_user_model().objects.filter(username="pat").exists()
    assert not AuditEntry.objects.filter(action__startswith="accounts:membership").exists()
