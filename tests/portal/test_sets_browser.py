"""A task set from the browser on the local cloud (headless Chromium against the real Daphne; the test process
plays the worker): "Run as a set" with a CSV parameter file, the preview, the submit, and the set page following
its elements until FINISHED without a reload. The set page's screenshot for docs/portal.md."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tasksets.models import TaskSet
from tests import helpers
from tests.plugins.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PARAMS = "n,word\n1,one\n2,two\n3,three\n"


def test_a_set_from_a_parameter_file_runs_to_finished_on_the_set_page(open_page, worker, world):
    page = open_page("bob")
    page.goto("/tasks/new")
    page.get_by_label("Name").fill("square-{{n}}")
    page.get_by_label("Command").fill("python3\n-c\nimport os; print(os.environ['word'], int('{{n}}') ** 2)")
    page.get_by_label("A set of tasks").check()
    page.get_by_label("Parameter file").set_input_files(
        files=[{"name": "params.csv", "mimeType": "text/csv", "buffer": PARAMS.encode()}]
    )
    page.get_by_label("At most running at once").fill("2")
    page.get_by_role("button", name="Preview the set").click()
    preview = page.locator("#set-preview")
    expect(preview).to_contain_text("The first 3 of 3 elements")
    expect(preview.locator('[data-preview-index="1"]')).to_contain_text("square-2")
    expect(preview.locator('[data-preview-index="2"]')).to_contain_text("int('3') ** 2")
    expect(page.get_by_label("Parameters")).to_have_value(PARAMS)  # the file's text kept: no second upload
    screenshot(page, "set-submit-preview", full_page=True)
    page.get_by_role("button", name="Submit set").click()
    page.wait_for_url(re.compile(r"/sets/[0-9a-f-]{36}/$"))
    expect(page.locator(".messages")).to_contain_text("submitted")

    expect(page.locator("#set-state")).to_have_text("Finished", timeout=90_000)  # followed live, no reload
    expect(page.locator('[data-count="succeeded"]')).to_have_text("3 succeeded")
    expect(page.locator("[data-element]")).to_have_count(3)
    expect(page.locator('[data-element="2"]')).to_contain_text("square-3")
    screenshot(page, "set-page", full_page=True)

    task_set = TaskSet.objects.get()
    assert (task_set.items, task_set.max_running) == (
        [{"n": 1, "word": "one"}, {"n": 2, "word": "two"}, {"n": 3, "word": "three"}],
        2,
    )
    body = helpers.api_call(worker.url, "GET", f"/api/v1/task-sets/{task_set.pk}", world.tokens["bob"])
    assert body["state"] == "FINISHED" and body["counts"]["succeeded"] == 3

    # The element's mark in the task list leads back to its set.
    page.goto("/tasks/")
    page.locator(f'[data-set-mark="{task_set.pk}"]').first.click()
    page.wait_for_url(re.compile(rf"/sets/{task_set.pk}/$"))
