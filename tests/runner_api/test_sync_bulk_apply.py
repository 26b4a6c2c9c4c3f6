"""Protocol v2's steady state, written in bulk (issue 11): a batch of progress reports costs the same few
queries whatever the number of attempts, and keeps every rule of the per-attempt path."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.exceptions import ValidationError

from notifications.models import FeedEvent
from runner_api import serializers
from runner_api.serializers import SyncEventsField
from tasks.models import Attempt, LogChunk, Task, TaskEvent
from tasks.services import runner_sync
from tests.runner_api.support import admitted, chunk, sync


def running(agent, world, count: int) -> list[Attempt]:  # noqa: F811
    attempts = [admitted(world) for _ in range(count)]
    sync(agent)
    names = [a.external_name for a in attempts]
    started = [{"attempt": name, "events": [{"seq": 1, "type": "started", "data": {"pid": 1}}]} for name in names]
    sync(agent, known=names, attempts=started)
    return attempts


def progress(attempt: Attempt, seq: int, offset: int, *, events: int = 3) -> dict:
    return {
        "attempt": attempt.external_name,
        "events": [{"seq": seq + i, "type": "progress", "data": {"message": f"m{seq + i}"}} for i in range(events)],
        "logs": [chunk("stdout", offset, b"line\n")],
        "usage": {"rss_kb": 1000 + seq},
    }


def test_a_progress_batch_costs_the_same_queries_for_two_attempts_as_for_eight(agent, world):  # noqa: F811
    few, many = running(agent, world, 2), running(agent, world, 8)
    counts = []
    for attempts in (few, many):
        names = [a.external_name for a in attempts]
        with CaptureQueriesContext(connection) as captured:
            assert sync(agent, known=names, attempts=[progress(a, 2, 0) for a in attempts]).status_code == 200
        counts.append(len(captured))
    assert counts[0] == counts[1], counts


def test_a_progress_batch_is_the_heartbeat_of_its_attempts_without_an_update_of_its_own(agent, world):  # noqa: F811
    attempts = running(agent, world, 3)
    names = [a.external_name for a in attempts]
    Attempt.objects.filter(pk__in=[a.pk for a in attempts]).update(runner_boot_id="", runner_pid=None)
    runner_sync._last_heartbeat.clear()  # a heartbeat is due
    with CaptureQueriesContext(connection) as captured:
        assert sync(agent, known=names, attempts=[progress(a, 2, 0) for a in attempts]).status_code == 200
    updates = [q["sql"] for q in captured.captured_queries if q["sql"].startswith('UPDATE "tasks_attempt"')]
    assert len(updates) == 1, updates  # the batch's counters, with the heartbeat's columns
    # the caller's connections; (savepoint) the tasks' and the attempts' locks; chunks, events, their feed copies,
    # the tasks' seq counters, the attempts' counters; (release); the hand-out's one look
    assert len(captured) <= 11, [q["sql"][:80] for q in captured.captured_queries]
    for attempt in attempts:
        attempt.refresh_from_db()
        assert (attempt.runner_boot_id, attempt.runner_pid) == ("b1", 4242) and attempt.last_heartbeat_at
    # One attempt held without a report this time: its heartbeat is the separate UPDATE, for it alone.
    runner_sync._last_heartbeat.clear()
    quiet = attempts[0]
    Attempt.objects.filter(pk=quiet.pk).update(runner_pid=None)
    sync(agent, known=names, attempts=[progress(a, 5, 5) for a in attempts[1:]])
    quiet.refresh_from_db()
    assert quiet.runner_pid == 4242


def test_a_progress_batch_stores_everything_once_and_copies_the_events_to_the_feed(agent, world):  # noqa: F811
    one, two = running(agent, world, 2)
    names = [one.external_name, two.external_name]
    batch = [progress(one, 2, 0), progress(two, 2, 0)]
    answer = sync(agent, known=names, attempts=batch).json()["attempts"]
    for attempt in (one, two):
        assert answer[attempt.external_name]["acked_seq"] == 4
        assert answer[attempt.external_name]["log_offsets"] == {"stdout": 5, "stderr": 0}
        attempt.refresh_from_db()
        assert attempt.acked_seq == 4 and attempt.log_stdout_bytes == 5 and attempt.log_bytes == 5
        assert attempt.usage == {"rss_kb": 1002} and attempt.last_heartbeat_at is not None
    # The same batch again, then the next one overlapping it: nothing is stored twice, nothing skipped.
    sync(agent, known=names, attempts=batch)
    sync(agent, known=names, attempts=[progress(one, 4, 5), progress(two, 5, 5)])
    one.refresh_from_db()
    two.refresh_from_db()
    assert (one.acked_seq, two.acked_seq) == (6, 7)
    assert LogChunk.objects.filter(attempt=one).count() == 2 and one.log_stdout_bytes == 10
    for attempt in (one, two):
        task = Task.objects.get(pk=attempt.task_id)
        seqs = list(task.events.order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, task.last_event_seq + 1))  # no gap, no duplicate
        messages = list(task.events.filter(type="progress").order_by("seq").values_list("message", flat=True))
        assert messages == [f"m{seq}" for seq in range(2, attempt.acked_seq + 1)]
        copied = set(FeedEvent.objects.filter(task_id=task.pk).values_list("source", flat=True))
        assert copied == {f"task-event:{pk}" for pk in TaskEvent.objects.filter(task=task).values_list("pk", flat=True)}


def test_a_closed_attempt_in_a_progress_batch_is_refused_and_the_others_applied(agent, world):  # noqa: F811
    done, busy = running(agent, world, 2)
    names = [done.external_name, busy.external_name]
    sync(agent, known=names, attempts=[{"attempt": done.external_name, "events": [{"seq": 2, "type": "exited"}]}])
    answer = sync(agent, known=names, attempts=[progress(done, 3, 0), progress(busy, 2, 0)]).json()["attempts"]
    assert answer[done.external_name]["closed"] is True and "closed" in answer[done.external_name]["error"]
    assert answer[busy.external_name]["acked_seq"] == 4
    assert not Task.objects.get(pk=done.task_id).events.filter(type="progress").exists()


@pytest.mark.parametrize(
    "item",
    [
        {"seq": 1, "type": "progress", "data": {"message": "  padded  ", "fraction": 1}},
        {"seq": 1, "type": "progress"},
        {"seq": 1, "type": "progress", "time": "", "data": {"fraction": 0.5}, "extra": True},
        {"seq": 1, "type": "progress", "data": {"message": "x" * 4001}},
        {"seq": 1, "type": "progress", "data": {"message": "nul\x00"}},
        {"seq": 1, "type": "progress", "data": {"message": "\ud800"}},
        {"seq": 1, "type": "progress", "data": {"fraction": 1.5}},
        {"seq": 1, "type": "progress", "data": {"fraction": True}},
        {"seq": 1, "type": "progress", "data": {"fraction": "0.5"}},
        {"seq": 1, "type": "progress", "data": {"message": 7}},
        {"seq": 1, "type": "progress", "data": None},
        {"seq": 1, "type": "progress", "data": {"message": "m", "other": 1}},
        {"seq": 1, "type": "progress", "time": "2026-11-30T12:00:00Z"},
        {"seq": 1, "type": "progress", "time": "yesterday"},
        {"seq": True, "type": "progress"},
        {"seq": 2**31, "type": "progress"},
        {"seq": 1, "type": "started", "data": {"pid": 3}},
    ],
)
def test_the_lean_progress_check_takes_exactly_what_the_serializer_takes(item, monkeypatch):
    """Plain progress events are checked in plain Python: the outcome must be the serializer's, refusals too."""

    def outcome() -> object:
        try:
            return SyncEventsField().to_internal_value([item])
        except ValidationError as exc:
            return exc.detail

    lean = outcome()
    monkeypatch.setattr(serializers, "plain_progress", lambda item: None)
    assert lean == outcome()


@pytest.mark.parametrize(
    "logs",
    [
        [{"stream": "stdout", "offset": 0, "data": "aGVsbG8K"}],
        [{"stream": "stderr", "offset": 7, "data": ""}, {"stream": "stdout", "offset": 3, "data": "eA=="}],
        [{"stream": "stdout", "offset": 0, "data": "aGVsbG8K", "extra": 1}],
        [{"stream": "stdout", "offset": 0}],
        [{"stream": "stdin", "offset": 0, "data": "eA=="}],
        [{"stream": "stdout", "offset": -1, "data": "eA=="}],
        [{"stream": "stdout", "offset": "12", "data": "eA=="}],
        [{"stream": "stdout", "offset": 1.0, "data": "eA=="}],
        [{"stream": "stdout", "offset": True, "data": "eA=="}],
        [{"stream": "stdout", "offset": 0, "data": "not base64!"}],
        [{"stream": "stdout", "offset": 0, "data": "eA==\n"}],
        [{"stream": "stdout", "offset": 0, "data": 7}],
        [{"stream": "stdout", "offset": 0, "data": None}],
        [{"stream": "stdout", "offset": 0, "data": "eA=="}, "piece"],
        [None],
        "logs",
        {"stream": "stdout"},
        None,
    ],
)
def test_the_lean_log_check_takes_exactly_what_the_serializer_takes(logs, monkeypatch):
    """Log pieces are checked in plain Python: the outcome must be the serializer's, refusals too."""

    def outcome() -> object:
        attempt = serializers.SyncAttemptSerializer(data={"attempt": "a-1", "logs": logs})
        return attempt.validated_data["logs"] if attempt.is_valid() else attempt.errors

    lean = outcome()
    monkeypatch.setattr(serializers, "plain_log_piece", lambda item: None)
    assert lean == outcome()


def test_a_log_piece_over_the_size_limit_is_refused(monkeypatch):
    monkeypatch.setattr(serializers, "MAX_LOG_CHUNK_BYTES", 3)
    big = serializers.SyncAttemptSerializer(
        data={"attempt": "a-1", "logs": [{"stream": "stdout", "offset": 0, "data": "eHh4eA=="}]}
    )
    assert not big.is_valid()
    assert "at most 3 bytes" in str(big.errors["logs"])
