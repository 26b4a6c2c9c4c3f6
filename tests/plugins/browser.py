"""Headless Chromium (Playwright) against the shared real Daphne: logged-in pages and screenshots.

Screenshots go to docs/screenshots/ (CLOUDPIVOT_SCREENSHOT_DIR overrides; empty: none).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tests import helpers

SCREENSHOTS = os.environ.get("CLOUDPIVOT_SCREENSHOT_DIR", str(helpers.BASE_DIR / "docs" / "screenshots"))
LAPTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium driven by Playwright; one per test module."""
    if not Path(helpers.CHROMIUM).exists():
        pytest.fail(f"{helpers.CHROMIUM} is missing: `apt-get install -y chromium` (make test does it)")
    # Playwright's sync API keeps an asyncio loop in this thread; Django's ORM refuses to run beside
    # a running loop unless told that it is safe, which it is: nothing else runs on that loop.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=helpers.CHROMIUM, args=helpers.CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def open_page(browser, live, world):
    """open_page("bob") → a fresh browser context logged in as bob through the login page."""
    contexts = []

    def login(name: str, viewport: dict | None = None):
        context = browser.new_context(viewport=viewport or LAPTOP, base_url=live.url)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto("/tasks/")
        assert "/accounts/login/" in page.url  # the page sent us to log in first
        page.get_by_label("Username or email").fill(name)
        page.get_by_label("Password").fill(f"pw-{name}")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(re.compile(r"/tasks/$"))
        return page

    yield login
    for context in contexts:
        context.close()


def screenshot(page, name: str, full_page: bool = False, mask: list | None = None) -> None:
    """`mask`: locators painted over (a secret the page shows once stays out of the docs)."""
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=full_page, mask=mask or [])
