"""Personal settings and project members in headless Chromium against the real Daphne (`live`): a token made on
the settings page works against the API and stops working once revoked; a project admin adds a member, who
then sees the project; the last admin is kept, with the reason next to the role."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from cloudpivot.accounts.models import Membership, Quota
from tests.builders import running
from tests.plugins.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_token_made_on_the_settings_page_works_against_the_api_until_revoked(open_page, live, world):
    page = open_page("bob")
    page.get_by_role("link", name=re.compile(r"bob · Settings")).click()
    page.wait_for_url(re.compile(r"/settings/$"))
    expect(page.get_by_role("heading", name="API tokens")).to_be_visible()

    page.get_by_label("Expires after (days)").fill("0")  # bad input: the error is put next to the field
    page.get_by_label("Token name").fill("laptop cli")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#id_expires_in_days_errors")).to_contain_text("greater than or equal to 1")
    expect(page.get_by_label("Expires after (days)")).to_have_attribute("aria-invalid", "true")

    page.get_by_label("Expires after (days)").fill("30")
    page.get_by_role("button", name="Create token").click()
    shown = page.locator("[data-new-token]")
    expect(shown).to_have_text(re.compile(r"^cpt_"))
    token = shown.inner_text()
    row = page.locator("tr", has_text="laptop cli")
    expect(row.locator("[data-token-state]")).to_have_text("active")
    screenshot(page, "settings-tokens", full_page=True, mask=[shown])

    headers = {"Authorization": f"Bearer {token}"}  # a plain HTTP client: no session cookie, the token alone
    answer = httpx.get(f"{live.url}/api/v1/projects", headers=headers, timeout=30)
    assert answer.status_code == 200 and [p["slug"] for p in answer.json()] == ["alpha"]

    page.goto("/settings/")  # shown once: a later visit has only the hint
    expect(page.locator("[data-new-token]")).to_have_count(0)
    expect(page.locator("tr", has_text="laptop cli")).to_contain_text(token[:10])
    page.locator("tr", has_text="laptop cli").get_by_role("button", name="Revoke laptop cli").click()
    expect(page.locator(".message.success")).to_contain_text("revoked")
    expect(page.locator("tr", has_text="laptop cli").locator("[data-token-state]")).to_have_text("revoked")
    assert httpx.get(f"{live.url}/api/v1/projects", headers=headers, timeout=30).status_code == 401

    page.goto("/")  # alpha has no limit set: the dashboard shows what it holds all the same, and links to it
    usage = page.locator('[data-quota="alpha:all clouds"][data-unlimited]')
    expect(usage).to_contain_text("no limits set")
    expect(usage.get_by_label("alpha Tasks: 0 in use, no limit")).to_have_text("0 in use")
    screenshot(page, "dashboard-usage")
    usage.get_by_role("link", name="alpha").click()
    page.wait_for_url(re.compile(r"/projects/alpha/$"))
    expect(page.locator("#quotas")).to_contain_text("No quotas set")

    page.goto("/settings/")
    page.get_by_label("Email me", exact=True).select_option("failures")
    page.get_by_role("button", name="Save notifications").click()
    expect(page.locator(".message.success")).to_have_text("Email notifications saved.")
    expect(page.get_by_label("Email me", exact=True)).to_have_value("failures")


def test_a_project_admin_adds_a_member_who_then_sees_the_project(open_page, world):
    Quota.objects.create(project=world.alpha, max_tasks=4, max_vcpu=8)
    running(world.bob, resources={"cpu": 2})
    charlie = open_page("charlie")
    charlie.goto("/projects/alpha/")
    expect(charlie.get_by_role("heading", name="Not found")).to_be_visible()

    page = open_page("alice")
    page.get_by_role("link", name="Projects").click()
    page.get_by_role("link", name="alpha").click()
    page.wait_for_url(re.compile(r"/projects/alpha/$"))
    expect(page.locator('[data-quota="alpha:all clouds"]')).to_contain_text("1 / 4")

    page.get_by_label("Username or email").fill("nobody")
    page.get_by_role("button", name="Add member").click()
    expect(page.locator("#id_username_errors")).to_contain_text(
        "no active user with the username or verified email 'nobody'"
    )

    page.get_by_label("Username or email").fill("charlie")
    page.get_by_label("Role", exact=True).select_option("reader")
    page.get_by_role("button", name="Add member").click()
    expect(page.locator(".message.success")).to_have_text("charlie added as Reader.")
    expect(page.locator('[data-member-row="charlie"]')).to_be_visible()

    alice_row = page.locator('[data-member-row="alice"]')  # the last admin keeps the role, told why
    alice_row.get_by_label("Role of alice", exact=True).select_option("reader")
    alice_row.get_by_role("button", name="Change the role of alice").click()
    expect(page.locator('[data-member-row="alice"] .error')).to_have_text(
        "alice is the last admin of alpha: make another member admin first"
    )
    screenshot(page, "project-members", full_page=True)
    assert Membership.objects.get(project=world.alpha, user=world.alice).role == "admin"

    charlie.goto("/projects/")
    charlie.get_by_role("link", name="alpha").click()
    expect(charlie.locator("[data-my-role]")).to_contain_text("reader")
    expect(charlie.locator('[data-member-row="alice"] [data-member-role]')).to_have_text("Admin")
    expect(charlie.get_by_role("button", name="Add member")).to_have_count(0)
    expect(charlie.locator('[data-quota="alpha:all clouds"]')).to_contain_text("1 / 4")
    screenshot(charlie, "project-as-member", full_page=True)

    charlie_row = page.locator('[data-member-row="charlie"]')  # alice changes charlie's role, then removes him
    charlie_row.get_by_label("Role of charlie", exact=True).select_option("submitter")
    charlie_row.get_by_role("button", name="Change the role of charlie").click()
    expect(page.locator(".message.success")).to_have_text("charlie is now Submitter.")
    assert Membership.objects.get(project=world.alpha, user=world.charlie).role == "submitter"
    charlie.reload()
    expect(charlie.locator("[data-my-role]")).to_contain_text("submitter")
    page.locator('[data-member-row="charlie"]').get_by_role("button", name="Remove charlie").click()  # confirmed
    expect(page.locator(".message.success")).to_have_text("charlie removed from alpha.")
    expect(page.locator('[data-member-row="charlie"]')).to_have_count(0)
    charlie.reload()
    expect(charlie.get_by_role("heading", name="Not found")).to_be_visible()
