"""Compare attempts, retry with the suggested change, and the phase timeline, in headless Chromium against the
real Daphne (`live`). The task really runs on the local cloud (the worker fixture's reconcile passes, the
host agent's Runner) and really times out; the suggestion is a longer timeout, which the user accepts.
Screenshots go to docs/screenshots/.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tasks.models import Task
from tasks.services.spec_changes import specs_by_attempt
from tasks.services.submission import task_submit
from tests.builders import hello_spec
from tests.plugins.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def badge(page, task_id):
    return page.locator(f'#task-summary [data-task-badge="{task_id}"]')


def test_a_timed_out_task_is_retried_with_the_suggested_timeout_and_its_attempts_compared(open_page, worker, world):
    program = "import time; print('working', flush=True); time.sleep(600)"
    task, _ = task_submit(
        user=world.bob,
        document=hello_spec(name="too short", command=["python3", "-c", program], timeout_seconds=2),
    )
    page = open_page("bob")
    page.goto(f"/tasks/{task.pk}/")
    expect(badge(page, task.pk)).to_have_attribute("data-state", "TIMED_OUT", timeout=40_000)

    suggestion = page.locator("#retry-suggestion")
    expect(suggestion).to_have_attribute("data-failure-class", "deadline")
    expect(suggestion).to_contain_text("time limit of 2 s")
    expect(page.get_by_label("timeout_seconds")).to_have_value("4")
    timeline = page.locator('#task-attempts [data-timeline="1"]')
    expect(timeline.locator("svg.timeline-bar rect").first).to_be_attached()
    for phase in ("queued", "admitted", "runner_contact", "program_started", "finished"):
        expect(timeline.locator(f'li[data-phase="{phase}"]')).to_have_count(1)
    screenshot(page, "task-retry-suggestion", full_page=True)

    page.get_by_role("button", name="Retry with this change").click()
    expect(page.locator(".message.success")).to_contain_text("timeout_seconds = 4")
    expect(badge(page, task.pk)).to_have_attribute("data-state", "TIMED_OUT", timeout=40_000)
    task = Task.objects.get(pk=task.pk)
    assert task.attempts_count == 2 and task.normalized["timeout_seconds"] == 4
    assert specs_by_attempt(task)[2]["timeout_seconds"] == 4  # the new attempt ran the changed spec

    page.reload()
    page.locator("#compare-attempts").click()
    page.wait_for_url(re.compile(rf"/tasks/{task.pk}/compare/$"))
    row = page.locator('#spec-differences tr[data-field="timeout_seconds"]')
    expect(row).to_contain_text("2")
    expect(row).to_contain_text("4")
    table = page.locator("#attempt-compare")
    expect(table.locator('td[data-side="a"]')).to_have_text("ran past its time limit")
    expect(table.locator('pre[data-side="b"]')).to_contain_text("working")
    expect(table.locator("svg.timeline-bar")).to_have_count(2)
    expect(page.locator("#compare-suggestion #suggested-value")).to_have_value("8")  # attempt 2 timed out at 4 s
    screenshot(page, "attempt-compare", full_page=True)

    page.goto("/clouds/local/")
    stats = page.locator("#phase-stats")
    for phase in ("queued", "admitted", "runner_contact", "program_started"):
        expect(stats.locator(f'tr[data-phase="{phase}"] td').last).to_have_text("2")
    stats.scroll_into_view_if_needed()
    screenshot(page, "cloud-phase-stats")
