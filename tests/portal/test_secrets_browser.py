"""The project's secrets page in headless Chromium: an admin adds and deletes a secret, a submitter only
sees its name; the value never comes back into the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from cloudpivot import secret_box
from cloudpivot.accounts.models import ProjectSecret
from tests.plugins.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
VALUE = "browser-Typed-secret-77"


def test_an_admin_adds_and_deletes_a_secret_a_submitter_sees_only_its_name(open_page, live, world):
    page = open_page("alice")
    page.goto("/projects/alpha/secrets/")
    expect(page.get_by_role("heading", name="Secrets of alpha")).to_be_visible()
    page.get_by_label("Name").fill("db-password")
    page.get_by_label("Value").fill(VALUE)
    page.get_by_role("button", name="Save secret").click()
    expect(page.locator('[data-secret-row="db-password"]')).to_be_visible()
    assert VALUE not in page.content()
    assert secret_box.decrypt(ProjectSecret.objects.get(name="db-password").value_encrypted) == VALUE

    page.get_by_label("Name").fill("db-password")
    page.get_by_label("Value").fill("again")
    page.get_by_role("button", name="Save secret").click()
    expect(page.get_by_role("alert")).to_contain_text("already has a secret named 'db-password'")
    expect(page.get_by_label("Value")).to_have_value("")  # a refused value is not put back either
    screenshot(page, "project-secrets", full_page=True)

    reader = open_page("bob")
    reader.goto("/projects/alpha/secrets/")
    expect(reader.locator('[data-secret-row="db-password"]')).to_contain_text("alice")
    expect(reader.get_by_role("button", name="Delete secret db-password")).to_have_count(0)
    expect(reader.get_by_label("Value")).to_have_count(0)

    page.goto("/projects/alpha/secrets/")
    page.get_by_role("button", name="Delete secret db-password").click()
    expect(page.get_by_text("No secrets yet.")).to_be_visible()
    assert not ProjectSecret.objects.exists()
