"""The debug hold on the task page, in headless Chromium against the real Daphne: a task on the kmock Kubernetes
fails with a hold, the page shows how to get in (the exact kubectl line) and until when; a reader sees no
Release button; the owner's "Release now" removes the Job. Screenshot: docs/screenshots/task-debug-hold.png.
"""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tasks.models import Attempt
from tasks.services import reconcile_pass
from tasks.services.submission import task_submit
from tests import helpers
from tests.clusters.debug_hold import fail_with_debug_container_up
from tests.plugins.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_page_says_how_to_get_in_and_release_removes_the_pod(open_page, live, kube, kube_connection, world):
    kube_connection.options = kube_connection.options | {"debug_hold_max_minutes": 30}
    kube_connection.save()
    document = {
        "cloud": "k3s-lab",
        "name": "crashes",
        "image": "python:3.12-slim",
        "command": ["python3", "train.py"],
        "debug_hold_minutes": 15,
    }
    task, _ = task_submit(user=world.bob, document=document)
    reconcile_pass()
    name = f"cp-{task.id.hex}-1"
    kube.run(name)
    helpers.drive(task, until={"RUNNING"})
    fail_with_debug_container_up(kube, name)
    helpers.drive(task, until={"FAILED"})
    pod = kube.pod(name)["metadata"]["name"]

    reader = open_page("rita")
    reader.goto(f"/tasks/{task.pk}/")
    expect(reader.locator("#debug-hold-1")).to_contain_text("kept for debugging")
    expect(reader.locator("#debug-hold-1").get_by_role("button", name="Release now")).to_have_count(0)

    page = open_page("bob")
    page.goto(f"/tasks/{task.pk}/")
    hold = page.locator("#debug-hold-1")
    expect(hold).to_contain_text("Attempt 1 is kept for debugging until")
    expect(hold.locator("pre[data-how-to-get-in='kubectl_exec']")).to_have_text(
        f"kubectl exec -n tasks -it {pod} -c debug -- sh"
    )
    until = Attempt.objects.get(task=task).hold_until
    expect(hold.locator("time")).to_have_attribute("datetime", timezone.localtime(until).isoformat())
    screenshot(page, "task-debug-hold")

    hold.get_by_role("button", name="Release now").click()  # the confirm dialog is accepted (open_page)
    expect(page.locator(".message.success")).to_contain_text("Released attempt 1")
    expect(page.locator("#debug-hold-1")).to_have_count(0)
    helpers.wait_for(lambda: reconcile_pass() is not None and name not in kube.jobs(), what="the Job removed")
    assert Attempt.objects.get(task=task).hold_released_by == "bob"
