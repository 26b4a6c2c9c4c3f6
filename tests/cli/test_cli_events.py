"""`cloudpivot events [-f]`: the event feed from the terminal, resumable by its cursor."""

from __future__ import annotations

import json

import pytest

from tasks.models import TaskEvent
from tests import builders
from tests.cli.support import Lines

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_events_prints_the_feed_and_follows_it_from_a_cursor(logged_in, world):
    first = builders.submit(world.bob)
    builders.submit(world.charlie)  # project beta: not bob's to see
    done = logged_in("events", "-o", "json")
    assert done.returncode == 0, done.stderr
    listed = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(e["task"], e["data"]["task_seq"]) for e in listed] == [
        (str(first.pk), e.seq) for e in TaskEvent.objects.filter(task=first).order_by("seq")
    ]
    cursor = listed[-1]["id"]
    assert f"--after {cursor}" in done.stderr
    table = logged_in("events").stdout.splitlines()
    assert len(table) == len(listed) and str(first.pk) in table[0]

    follower = logged_in.start("events", "-f", "--after", str(cursor), "-o", "json", "--type", "task.*")
    lines = Lines(follower.stdout)
    try:
        later = builders.submit(world.bob)
        entry = json.loads(lines.next(timeout=30))
        assert entry["task"] == str(later.pk) and entry["id"] > cursor
    finally:
        follower.kill()
