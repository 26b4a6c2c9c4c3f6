"""The live pages hear an event that comes while htmx is still settling a swap (headless Chromium).

htmx wires a swapped-in element up (its `from:body` listener included) only once the swap settles, 20 ms
later by default and later still on a busy machine. A page whose refresh listener sat on the element it
swapped was deaf in that instant: an event then was lost, and the page stayed stale. Played here with a
settle of 8 s: a refresh is swapped in, and the next event comes inside that window.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.builders import submit

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SWAP_AND_SLOW_SETTLE = """([element, event]) => {
    htmx.config.defaultSettleDelay = 8000;
    document.getElementById(element).dataset.before = "1";
    htmx.trigger(document.body, event);
}"""


def refreshed_with_a_slow_settle(page, element: str, event: str) -> None:
    """A refresh swapped in whose new content htmx wires up only 8 s later."""
    page.evaluate(SWAP_AND_SLOW_SETTLE, [element, event])
    expect(page.locator(f"#{element}[data-before]")).to_have_count(0)


def test_the_task_page_hears_the_exit_that_comes_while_a_swap_settles(open_page, worker, world, tmp_path):
    release = tmp_path / "release"
    program = f"import os, time\nprint('up', flush=True)\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)"
    task = submit(world.bob, name="on a slow machine", command=["python3", "-c", program])
    page = open_page("bob")
    page.goto(f"/tasks/{task.pk}/")
    expect(page.locator("#task-log")).to_contain_text("up", timeout=30_000)
    badge = page.locator(f'#task-summary [data-task-badge="{task.pk}"]')
    expect(badge).to_have_attribute("data-state", "RUNNING")
    page.wait_for_timeout(1000)  # the refresh the start asked for has come and settled

    refreshed_with_a_slow_settle(page, "task-summary", "cp-task-changed")
    release.write_text("")
    expect(page.locator("#task-summary")).to_contain_text("exited with code 0", timeout=30_000)
    expect(page.locator("#task-attempts tbody")).to_contain_text("Finished")


def test_the_dashboard_hears_a_new_task_that_comes_while_a_swap_settles(open_page, worker, world):
    page = open_page("bob")
    page.goto("/")
    expect(page.locator("[data-live-status]")).to_have_text("Live")

    refreshed_with_a_slow_settle(page, "dashboard-tasks", "cp-dashboard-refresh")
    task = submit(world.bob, name="new while settling", command=["true"])
    expect(page.locator(f'#dashboard-tasks [data-task-badge="{task.pk}"]').first).to_be_visible(timeout=30_000)
