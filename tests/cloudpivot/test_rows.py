"""cloudpivot.rows stores exactly what the ORM would: read back through the ORM, rows compare equal."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cloudpivot.rows import SQLITE_MAX_VALUES, _prep, objects_insert, rows_update
from notifications.models import FeedEvent
from tasks.models import Attempt, LogChunk, Task, TaskEvent
from tests.builders import running, submit

pytestmark = pytest.mark.django_db


def test_events_inserted_in_one_statement_read_back_equal_and_get_their_ids(world):
    task = submit(world.bob)
    data = [{"n": n, "nested": {"text": "é\"'\\", "list": [1, None, True]}} for n in range(40)]
    events = [TaskEvent(task=task, seq=1000 + n, type="progress", message=f"line {n}", data=data[n]) for n in range(40)]
    with CaptureQueriesContext(connection) as queries:
        objects_insert(TaskEvent, events)
    assert len([q for q in queries.captured_queries if q["sql"].startswith("INSERT")]) == 1
    assert all(event.pk for event in events) and len({event.pk for event in events}) == 40
    stored = {event.pk: event for event in TaskEvent.objects.filter(task=task)}
    for event in events:
        again = stored[event.pk]
        assert (again.seq, again.message, again.data) == (event.seq, event.message, event.data)
        assert again.created_at is not None and abs(again.created_at - timezone.now()) < dt.timedelta(minutes=1)


def test_binary_and_nullable_columns_round_trip(world):
    task, attempt = running(world.bob)
    payload = bytes(range(256))
    objects_insert(
        LogChunk, [LogChunk(task=task, attempt=attempt, stream="stdout", offset=0, position=0, data=payload)]
    )
    assert bytes(LogChunk.objects.get(attempt=attempt).data) == payload
    entry = FeedEvent(type="task.progress", project_id=task.project_id, task_id=task.pk, data={}, source="rows-test")
    entry.occurred_at = timezone.now()
    objects_insert(FeedEvent, [entry])
    again = FeedEvent.objects.get(pk=entry.pk)
    assert again.position is None and again.instance_id is None and again.data == {}


def test_a_batch_larger_than_one_sqlite_statement_is_stored_whole(world):
    task = submit(world.bob)
    count = SQLITE_MAX_VALUES // 6 + 7  # more rows than one statement of six columns carries
    objects_insert(TaskEvent, [TaskEvent(task=task, seq=1000 + n, type="progress") for n in range(count)])
    stored = TaskEvent.objects.filter(task=task, seq__gte=1000).values_list("seq", flat=True)
    assert sorted(stored) == list(range(1000, 1000 + count))


def test_rows_update_writes_each_row_its_own_values_and_leaves_the_others(world):
    attempts = [running(world.bob)[1] for _ in range(3)]
    before = Attempt.objects.get(pk=attempts[2].pk).last_heartbeat_at
    now = timezone.now()
    for index, attempt in enumerate(attempts[:2]):
        attempt.log_stdout_bytes = 100 + index
        attempt.last_heartbeat_at = now - dt.timedelta(seconds=index)
        attempt.usage = {"cpu_seconds": index + 0.5}
    with CaptureQueriesContext(connection) as queries:
        rows_update(Attempt, ["log_stdout_bytes", "last_heartbeat_at", "usage"], attempts[:2])
    assert len(queries.captured_queries) == 1
    for index, attempt in enumerate(attempts[:2]):
        attempt.refresh_from_db()
        assert attempt.log_stdout_bytes == 100 + index
        assert attempt.last_heartbeat_at == now - dt.timedelta(seconds=index)
        assert attempt.usage == {"cpu_seconds": index + 0.5}
    untouched = Attempt.objects.get(pk=attempts[2].pk)
    assert untouched.log_stdout_bytes == 0 and untouched.last_heartbeat_at == before


def test_rows_update_of_text_nulls_and_a_uuid_key(world):
    """The other column kinds a Runner batch writes: text, a NULL, and a table keyed by UUID (Task)."""
    task, attempt = running(world.bob)
    attempt.runner_boot_id, attempt.runner_pid, attempt.runner_contact_at = "boot-é'\"", None, None
    rows_update(Attempt, ["runner_boot_id", "runner_pid", "runner_contact_at"], [attempt])
    task.last_event_seq = 77
    rows_update(Task, ["last_event_seq"], [task])
    again = Attempt.objects.get(pk=attempt.pk)
    assert (again.runner_boot_id, again.runner_pid, again.runner_contact_at) == ("boot-é'\"", None, None)
    assert Task.objects.get(pk=task.pk).last_event_seq == 77


@pytest.mark.parametrize(
    ("model", "name", "value"),
    [
        (Attempt, "runner_boot_id", "b'oot"),
        (Attempt, "failure_reason", "a reason"),
        (Attempt, "runner_pid", 4242),
        (Attempt, "log_bytes", 2**40),
        (Attempt, "number", 3),
        (Attempt, "last_heartbeat_at", dt.datetime(2026, 12, 3, 9, 0, 0, 12345, tzinfo=dt.UTC)),
        (Attempt, "last_heartbeat_at", None),
        (LogChunk, "offset", 0),
        (LogChunk, "stream", "stdout"),
    ],
)
def test_plain_values_are_prepared_as_the_orm_prepares_them(model, name, value):
    """_prep's short way for plain values gives what the field's get_db_prep_save gives."""
    field = model._meta.get_field(name)
    assert repr(_prep(connection, field, value)) == repr(field.get_db_prep_save(value, connection))
