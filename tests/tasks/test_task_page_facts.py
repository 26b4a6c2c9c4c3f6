"""The task page says only what happened: no run time for a program that never started, the console tail."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.urls import reverse

from tasks.models import Task
from tasks.services.actions import task_cancel
from tasks.services.lifecycle import event_append

pytestmark = pytest.mark.django_db


def page(pages, task) -> str:
    response = pages("bob").get(reverse("tasks:task_detail", kwargs={"task_id": task.pk}))
    assert response.status_code == 200
    return response.content.decode()


def test_a_task_that_never_ran_shows_no_empty_run_time(pages, world, make):
    task = task_cancel(task_id=make.submit(world.bob, name="never-ran").pk, user=world.bob)
    assert task.finished_at and task.started_at is None
    content = page(pages, task)
    assert "(ran )" not in content and "(ran" not in content
    assert "(the program never started)" in content
    ran = make.finished(world.bob, name="ran")
    assert "(ran " in page(pages, ran)


def test_the_console_tail_recorded_for_a_silent_runner_is_on_the_page(pages, world, make):
    task = make.submit(world.bob, name="silent")
    with transaction.atomic():
        locked = Task.objects.select_for_update().get(pk=task.pk)
        event_append(
            task=locked,
            type="console",
            message="console log tail of the server",
            data={"attempt": 1, "tail": "cloud-init: <failed> to reach the callback URL\n"},
        )
    content = page(pages, task)
    assert "console log tail of the server" in content
    assert "cloud-init: &lt;failed&gt; to reach the callback URL" in content  # shown, and escaped
