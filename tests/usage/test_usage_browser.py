"""The usage page in headless Chromium: a project's month by user and cloud, the budget's burn-down with the
hard stop's reason, the CSV download, a bad month named next to the field."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.builders import ran
from tests.plugins.browser import screenshot
from usage.budgets import budget_sweep
from usage.models import ProjectBudget

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_researcher_sees_the_month_the_burn_down_and_the_hold_and_downloads_the_csv(open_page, world):
    now = timezone.now()
    ran(world.bob, began=now - dt.timedelta(seconds=90), ended=now, cpu=120, memory_mb=4096)  # 3 core-hours
    ProjectBudget.objects.create(project=world.alpha, core_hours=Decimal("2.5"), hard_stop=True)
    budget_sweep()

    page = open_page("bob")
    page.goto(f"/projects/{world.alpha.slug}/")
    page.locator("[data-usage-link]").click()
    page.wait_for_url(f"**/projects/{world.alpha.slug}/usage/")
    expect(page.locator('[data-usage-row="bob/local"]')).to_contain_text("3.00")
    expect(page.locator("[data-budget-state]")).to_have_attribute("data-budget-state", "exhausted")
    expect(page.locator("[data-budget-state]")).to_contain_text("3.00 of 2.50 core-hours used (120.0 %)")
    expect(page.locator("[data-budget-hold]")).to_contain_text("(hard stop)")
    expect(page.locator("[data-burndown] polyline.actual")).to_have_count(1)
    screenshot(page, "project-usage", full_page=True)

    with page.expect_download() as download:
        page.locator("[data-usage-csv]").click()
    text = open(download.value.path()).read()
    assert text.splitlines()[1].startswith(f"{now:%Y-%m},alpha,bob,local,3.00,")

    page.get_by_label("Month").fill("2026-01")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("heading", name="Usage in 2026-01")).to_be_visible()
    expect(page.locator("[data-usage-table]")).to_contain_text("Nothing ran in 2026-01.")

    page.goto(f"/projects/{world.alpha.slug}/usage/?month=someday")
    expect(page.locator("#month-error")).to_contain_text("write it as YYYY-MM")
    assert page.goto(f"/projects/{world.beta.slug}/usage/").status == 404  # not bob's project
