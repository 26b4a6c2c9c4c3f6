"""A task stream reads the log alone on a log doorbell's ring: the task, its visibility to the user and its
events are read on the poll and on an event's ring (issue 11: 100 programs printing ring many times a second)."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext

from cloudpivot.accounts.models import Membership
from tasks import consumers
from tasks.consumers import TaskConsumer
from tests.builders import report, running, write_log

pytestmark = pytest.mark.django_db


def following(user, task) -> TaskConsumer:
    consumer = TaskConsumer()
    consumer.user, consumer.task = user, task
    consumer.seq = consumer.attempt = consumer.position = 0
    consumer.sent_state = None
    return consumer


def test_a_log_ring_between_two_polls_reads_the_log_alone(world):
    task, attempt = running(world.bob)
    consumer = following(world.bob, task)
    assert consumer.next_read() == consumer.read_new  # the first read is whole
    consumer.next_read()()
    write_log(attempt, b"a line\n")
    read = consumer.next_read()
    assert read == consumer.read_log_new
    with CaptureQueriesContext(connection) as queries:
        messages = read()
    assert [m["data"] for m in messages] == ["a line\n"]
    assert len(queries) == 2  # the attempt's counters and the new chunks; no membership, task or events


def test_an_event_ring_or_the_poll_reads_everything(world, monkeypatch):
    task, attempt = running(world.bob)
    consumer = following(world.bob, task)
    consumer.read_new()
    report(attempt, {"type": "exited", "data": {"exit_code": 0}})
    consumer.events_rung = True  # what task_changed does on the event's ring
    assert consumer.next_read() == consumer.read_new
    assert any(m["type"] == "state" and m["state"] == "SUCCEEDED" for m in consumer.next_read()())
    assert consumer.next_read() == consumer.read_log_new
    monkeypatch.setattr(TaskConsumer, "poll_seconds", 0)  # the poll is due
    assert consumer.next_read() == consumer.read_new


def test_a_user_removed_from_the_project_is_refused_by_the_next_whole_read(world, monkeypatch):
    task, attempt = running(world.bob)
    consumer = following(world.bob, task)
    consumer.read_new()
    Membership.objects.filter(user=world.bob, project=task.project).delete()
    monkeypatch.setattr(TaskConsumer, "poll_seconds", 0)
    assert consumer.next_read()() is None  # the stream ends (4404)


def test_a_log_read_that_fails_is_read_again(world, monkeypatch):
    task, attempt = running(world.bob)
    consumer = following(world.bob, task)
    consumer.read_new()
    write_log(attempt, b"kept\n")

    def away(**kwargs):
        raise OperationalError("the connection is lost")

    monkeypatch.setattr(consumers, "log_read", away)
    with pytest.raises(OperationalError):
        consumer.read_log_new()
    monkeypatch.undo()
    assert [m["data"] for m in consumer.read_log_new()] == ["kept\n"]
