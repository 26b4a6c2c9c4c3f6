"""The task page's timeline reads a page of events, not all of a chatty task's (issue 34)."""

from __future__ import annotations

import pytest

from tasks.models import TaskEvent
from tests.builders import submit

pytestmark = pytest.mark.django_db


def test_the_page_shows_the_newest_events_and_links_to_the_earlier_ones(pages, world):
    task = submit(world.bob)
    first = task.last_event_seq
    TaskEvent.objects.bulk_create(
        TaskEvent(task=task, seq=first + n, type="progress", message=f"step {n}") for n in range(1, 501)
    )
    type(task).objects.filter(pk=task.pk).update(last_event_seq=first + 500)
    text = pages("bob").get(f"/tasks/{task.pk}/").content.decode()
    assert "step 500" in text and "step 301" in text and "step 300<" not in text
    assert text.count("<li data-seq=") == 200
    assert f"{first + 300} earlier events not shown" in text and f'href="?before={first + 301}' in text
    older = pages("bob").get(f"/tasks/{task.pk}/?before={first + 301}").content.decode()
    assert "step 300<" in older and "step 101<" in older and "step 301<" not in older
    assert pages("bob").get(f"/tasks/{task.pk}/?before=x").status_code == 404
