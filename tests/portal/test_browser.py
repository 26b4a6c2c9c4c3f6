"""The portal in headless Chromium (Playwright), against a real Daphne on loopback.

Tasks really run: the test process plays the worker (reconcile passes in a background
thread, enqueued jobs inline), the Runner reports to the Daphne the browser talks to.
The server is the shared `live` Daphne (test settings: it serves the static files through the
finders). The browser logs in through the login page with a real password (tests/plugins/browser.py).
Screenshots of the main pages go to docs/screenshots/.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone
from django_q.conf import Conf
from playwright.sync_api import expect

from cloudpivot.accounts.models import Quota
from tasks.models import Task
from tests.builders import submit
from tests.plugins.browser import PHONE, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def fill_form(page, *, command: list[str], name: str = "", env: str = "") -> None:
    page.goto("/tasks/new")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Command").fill("\n".join(command))
    page.get_by_label("Environment").fill(env)


def badge(page, task_id):
    return page.locator(f'#task-summary [data-task-badge="{task_id}"]')


def current_task_id(page) -> str:
    return re.search(r"/tasks/([0-9a-f-]{36})/", page.url).group(1)


def test_a_researcher_submits_a_task_and_watches_log_and_state_live(open_page, worker, world):
    page = open_page("bob")
    dashboard = open_page("bob")
    dashboard.goto("/")
    expect(dashboard.locator("[data-live-status]")).to_have_text("Live")

    program = (
        "import time; print('line 1', flush=True); time.sleep(2); "
        "print('line 2', flush=True); time.sleep(2); print('line 3')"
    )
    fill_form(page, command=["python3", "-c", program], name="watch me", env="GREETING=hello")
    page.get_by_role("button", name="Submit task").first.click()
    page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    task_id = current_task_id(page)
    page.evaluate("window.__notReloaded = true")

    log = page.locator("#task-log")
    expect(log).to_contain_text("line 1", timeout=30_000)
    assert "line 3" not in log.inner_text()  # the text streams in while the program runs
    expect(badge(page, task_id)).to_have_attribute("data-state", "RUNNING")
    expect(badge(page, task_id)).to_have_attribute("data-state", "SUCCEEDED", timeout=30_000)
    expect(log).to_have_text(re.compile(r"line 1\nline 2\nline 3\n?"))
    expect(page.locator("#task-events")).to_contain_text("SUCCEEDED")
    # htmx refreshed the panels: the attempt has finished, and there is nothing left to cancel.
    expect(page.locator("#task-attempts tbody")).to_contain_text("Finished")
    expect(page.locator("#task-summary")).to_contain_text("exited with code 0")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    expect(page.locator("#log-earlier")).to_be_hidden()
    assert page.evaluate("window.__notReloaded") is True
    screenshot(page, "task-detail", full_page=True)

    # The dashboard opened before the submit learnt about the task, also without a reload.
    expect(dashboard.locator(f'[data-task-badge="{task_id}"]').first).to_have_attribute(
        "data-state", "SUCCEEDED", timeout=15_000
    )
    dashboard.reload()
    screenshot(dashboard, "dashboard")

    page.goto("/tasks/")
    expect(page.locator(f'[data-task-badge="{task_id}"]')).to_have_text("Succeeded")
    screenshot(page, "tasks-list")
    page.goto("/clouds/")
    expect(page.get_by_role("link", name="local")).to_be_visible()
    screenshot(page, "clouds")

    phone = open_page("bob", viewport=PHONE)
    phone.goto(f"/tasks/{task_id}/")
    expect(phone.locator("#task-log")).to_contain_text("line 3")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]  # no sideways scrolling
    screenshot(phone, "task-detail-phone")


def test_cancel_stops_a_running_task(open_page, worker, world):
    page = open_page("bob")
    fill_form(page, command=["sleep", "600"], name="long sleep")
    page.get_by_role("button", name="Submit task").first.click()
    page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    task_id = current_task_id(page)
    expect(badge(page, task_id)).to_have_attribute("data-state", "RUNNING", timeout=30_000)
    page.get_by_role("button", name="Cancel").click()  # confirms the dialog (see open_page)
    expect(page.locator(".message.success")).to_contain_text("Cancel requested")
    expect(badge(page, task_id)).to_have_attribute("data-state", "CANCELLED", timeout=30_000)
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    assert Task.objects.get(pk=task_id).state == "CANCELLED"


def test_a_task_over_quota_shows_the_limit_that_holds_it_and_its_place_in_the_queue(open_page, worker, world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=1)
    page = open_page("bob")
    ids = []
    for name in ("first", "second"):
        fill_form(page, command=["sleep", "600"], name=name)
        page.get_by_role("button", name="Submit task").first.click()
        page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
        ids.append(current_task_id(page))
        if name == "first":
            expect(badge(page, ids[0])).to_have_attribute("data-state", "RUNNING", timeout=30_000)
    expect(badge(page, ids[1])).to_have_attribute("data-state", "PENDING", timeout=30_000)
    expect(page.locator("#task-reason")).to_have_text("waiting: project alpha quota on local: 1/1 tasks in use")
    expect(page.locator("#task-queue-position")).to_contain_text("Place in the queue of local: 1")
    screenshot(page, "task-waiting-for-quota")
    page.goto("/")
    expect(page.locator(f'[data-task-row="{ids[1]}"] [data-queue-position]')).to_contain_text("place 1 in the queue")
    api = {"Authorization": f"Bearer {world.tokens['bob']}"}
    page.request.post(f"/api/v1/tasks/{ids[0]}/cancel", headers=api)
    page.goto(f"/tasks/{ids[1]}/")  # the place disappears once the quota frees and the task is admitted
    expect(badge(page, ids[1])).to_have_attribute("data-state", "RUNNING", timeout=30_000)
    expect(page.locator("#task-queue-position")).to_have_count(0)
    page.request.post(f"/api/v1/tasks/{ids[1]}/cancel", headers=api)


def test_a_bad_spec_shows_its_error_next_to_the_field(open_page, live, world):
    page = open_page("bob")
    fill_form(page, command=["echo", "hi"], env="1BAD=x")
    page.get_by_role("button", name="Submit task").first.click()
    field = page.locator("#field-form-env")
    expect(field.locator(".error")).to_contain_text("not a valid environment variable name: 1BAD")
    expect(page.get_by_label("Environment")).to_have_attribute("aria-invalid", "true")
    screenshot(page, "submit-error")

    page.get_by_role("tab", name="JSON / YAML").click()
    editor = page.get_by_label("Task document (JSON or YAML)")
    editor.fill('{"cloud": "local", "command": ["echo", 5]}')
    page.locator("#panel-raw").get_by_role("button", name="Submit task").click()
    expect(page.locator("#field-raw-document .error")).to_contain_text("command.1: must be a string")
    expect(page.get_by_role("tab", name="JSON / YAML")).to_have_attribute("aria-selected", "true")
    assert not Task.objects.exists()


def test_a_reader_sees_the_task_but_no_cancel_button_and_the_api_refuses(open_page, live, world, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)  # admission stays queued: the task waits, PENDING
    task = submit(world.bob, name="bobs task")
    page = open_page("rita")
    page.goto(f"/tasks/{task.pk}/")
    expect(page.get_by_role("heading", name="bobs task")).to_be_visible()
    expect(page.locator("[data-live-status]")).to_have_text("Live")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    status = page.evaluate(
        """async (id) => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const headers = {"X-CSRFToken": token};
            const response = await fetch(`/api/v1/tasks/${id}/cancel`, {method: "POST", headers});
            return response.status;
        }""",
        str(task.pk),
    )
    assert status == 403
    assert Task.objects.get(pk=task.pk).state == "PENDING"


def test_the_cloud_page_charts_sampled_figures(open_page, live, world):
    from clusters.metrics.sampling import sample_all

    page = open_page("bob")
    page.goto("/clouds/local/")
    expect(page.get_by_text("No samples yet")).to_be_visible()
    for minutes_ago in (30, 15, 0):  # three sampling passes, as the minute schedule would have made
        sample_all(now=timezone.now() - dt.timedelta(minutes=minutes_ago))
    page.reload()
    waiting = page.locator('figure[data-metric-chart="Waiting tasks"]')
    expect(waiting).to_be_visible()
    expect(waiting.locator("svg")).to_have_attribute("aria-label", re.compile(r"^Waiting tasks: 0 tasks now, 3 points"))
    points = waiting.locator("polyline").get_attribute("points").split()
    assert len(points) == 3
    box = waiting.locator("svg").bounding_box()
    assert box and box["width"] > 200 and box["height"] > 50  # drawn at a readable size
    assert page.locator("figure.chart").count() >= 2  # active and waiting tasks (node charts are for admins)
    screenshot(page, "cloud-metrics", full_page=True)
