"""Declared outputs on the task page, in headless Chromium against the real Daphne: a `local` task writes two
outputs, the Results section lists them with their SHA-256, and its download link gives the file's bytes
(docs/data.md). Screenshot: docs/screenshots/task-results.png."""

from __future__ import annotations

import hashlib

import pytest
from playwright.sync_api import expect

from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec
from tests.plugins.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PROGRAM = "open('report.txt', 'w').write('all good\\n')\nopen('table.csv', 'w').write('x,y\\n1,2\\n')\n"


def test_the_results_section_downloads_an_output_through_its_signed_link(open_page, live, world, tmp_path):
    document = hello_spec(command=["python3", "-c", PROGRAM], outputs=[{"path": "*.txt"}, {"path": "*.csv"}])
    task, _ = task_submit(user=world.bob, document=document)
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason

    page = open_page("bob")
    page.goto(f"/tasks/{task.pk}/")
    results = page.locator("#task-outputs")
    expect(results).to_contain_text("complete")
    expect(results).to_contain_text(hashlib.sha256(b"all good\n").hexdigest())
    with page.expect_download() as info:
        results.locator("a[data-output='report.txt']").click()
    download = info.value
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    assert download.suggested_filename == "report.txt" and saved.read_bytes() == b"all good\n"
    screenshot(page, "task-results")
