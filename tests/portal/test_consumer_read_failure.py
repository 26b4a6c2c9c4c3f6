"""A task stream's read that fails half-way (the database went away between its queries) loses nothing.

`TaskConsumer.read_new` reads the events, then the log; it moves its positions as it goes. When the log read
fails, the events it had read are never sent, so the positions must be as before the read, or the next read
(after the database is back) starts past them: a gap (issue 16, item 2).
"""

from __future__ import annotations

import pytest
from django.db import OperationalError

from tasks import consumers
from tasks.consumers import TaskConsumer
from tests.builders import report, running, write_log

pytestmark = pytest.mark.django_db


def test_a_read_that_fails_half_way_is_read_again_whole(world, monkeypatch):
    task, attempt = running(world.bob)
    write_log(attempt, b"first line\n")
    consumer = TaskConsumer()
    consumer.user, consumer.task = world.bob, task
    consumer.seq = consumer.attempt = consumer.position = 0
    consumer.sent_state = None
    whole = consumer.read_new()
    consumer.seq = consumer.attempt = consumer.position = 0
    consumer.sent_state = None

    real_log_read = consumers.log_read

    def away(**kwargs):
        raise OperationalError("the connection is lost")

    monkeypatch.setattr(consumers, "log_read", away)
    with pytest.raises(OperationalError):
        consumer.read_new()
    monkeypatch.setattr(consumers, "log_read", real_log_read)
    assert consumer.read_new() == whole  # every event and the log from 0: nothing skipped
    report(attempt, {"type": "exited", "data": {"exit_code": 0}})
    assert [m["type"] for m in consumer.read_new() if m["type"] == "event"]  # and it goes on from there
