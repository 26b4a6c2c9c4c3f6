"""What the event feed costs (issue 13): `make bench BENCH_ARGS="-k feed"` (BENCH_EVENTS=N).

1. appending N task events (tasks' event_append, one transaction per event as the state machine does)
   with the feed's copy (post_save) connected and disconnected: the feed's cost on the task path;
2. sequencing the N waiting entries (one pass);
3. reading them all back by cursor, 100 a page, as a follower does.
Figures, not assertions: the machine is shared and noisy.
"""

from __future__ import annotations

import os
import time

from django.db import connection, transaction
from django.db.models.signals import post_save

from notifications import capture
from notifications.feed import FeedFilter, feed_page, feed_sequence
from tasks.models import Task, TaskEvent
from tasks.services.lifecycle import event_append
from tests import builders

EVENTS = int(os.environ.get("BENCH_EVENTS", "2000"))


def append_many(task_id, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        with transaction.atomic():
            task = Task.objects.select_for_update().get(pk=task_id)
            event_append(task=task, type="progress", message="tick")
    return time.perf_counter() - started


def test_feed_cost(transactional_db, world):
    vendor = connection.vendor
    task = builders.submit(world.bob)
    append_many(task.pk, 50)  # warm up
    without = with_feed = 0.0
    for _ in range(2):  # alternated, so a noisy neighbour weighs on both
        post_save.disconnect(sender=TaskEvent, dispatch_uid="notifications.task_event")
        try:
            without += append_many(task.pk, EVENTS // 2)
        finally:
            capture.connect()
        with_feed += append_many(task.pk, EVENTS // 2)
    started = time.perf_counter()
    given = feed_sequence()
    sequencing = time.perf_counter() - started
    started, cursor, read = time.perf_counter(), 0, 0
    while True:
        rows, cursor, more = feed_page(user=world.rita, where=FeedFilter(), after=cursor, limit=100)
        read += len(rows)
        if not more:
            break
    reading = time.perf_counter() - started
    print(f"\n=== event feed on {vendor}, {EVENTS} task events")
    print(f"event_append without the feed copy   {without / EVENTS * 1e6:8.0f} µs/event")
    print(f"event_append with the feed copy      {with_feed / EVENTS * 1e6:8.0f} µs/event")
    print(f"  added by the feed                  {(with_feed - without) / EVENTS * 1e6:8.0f} µs/event")
    print(f"sequencing ({given} entries)          {sequencing / max(given, 1) * 1e6:8.0f} µs/entry")
    print(f"reading by cursor, 100 a page ({read}) {reading / max(read, 1) * 1e6:8.0f} µs/entry")
