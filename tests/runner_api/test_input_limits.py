"""What the Runner API refuses, request by request: too large a body (413, before it is decoded) and
every field of events, heartbeats and sync reports that the database could not store or that makes
no sense (400 naming the field; for events also `rejected_seq`), with nothing applied."""

from __future__ import annotations

import json

import pytest
from django.db import transaction

from tasks.models import Task
from tasks.services.attempts import attempt_create
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import hello_spec, v1_runner_client


@pytest.fixture
def attempt(world):
    task, _ = task_submit(user=world.bob, document=hello_spec())
    with transaction.atomic():
        return attempt_create(task=task_lock(task.pk), reason="test")


runner = v1_runner_client  # these attempts speak protocol v1, as a VM booted before its retirement


def ev(seq, type, time="2026-11-30T12:00:00Z", **data):
    return {"seq": seq, "type": type, "time": time, "data": data}


def test_a_body_over_the_limit_is_a_413_before_it_is_decoded(attempt, settings):
    settings.RUNNER_MAX_REQUEST_BYTES = 1000
    client = runner(attempt)
    not_json = b"{" * 5000  # were it decoded, it would be a 400 parse_error
    for path in ("/runner/v1/events", "/runner/v1/logs", "/runner/v1/heartbeat", "/runner/v2/sync"):
        response = client.generic("POST", path, not_json, content_type="application/json")
        assert response.status_code == 413, (path, response.content)
        assert response.json()["code"] == "request_too_large"
        assert "at most 1000" in response.json()["message"]
    small = client.post("/runner/v1/events", {"events": [ev(1, "started", pid=4)]}, format="json")
    assert small.status_code == 200 and small.json()["acked_seq"] == 1


def test_json_nested_beyond_what_python_parses_is_a_400_not_a_500(attempt):
    body = b'{"events": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = runner(attempt).generic("POST", "/runner/v1/events", body, content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error"


BAD_EVENTS = [
    (ev(1, "exited", exit_code=300), "events.0.data.exit_code"),
    (ev(1, "exited", exit_code=-1), "events.0.data.exit_code"),
    (ev(1, "exited", exit_code="zero"), "events.0.data.exit_code"),
    (ev(1, "exited", exit_code=None, signal=0), "events.0.data.signal"),
    (ev(1, "started", pid=2**40), "events.0.data.pid"),
    (ev(2**40, "progress", message="x"), "events.0.seq"),
    (ev(1, "progress", fraction=3.5), "events.0.data.fraction"),
    (ev(1, "progress", message="x" * 5000), "events.0.data.message"),
    (ev(1, "started", time="yesterday", pid=1), "events.0.time"),
    (ev(1, "started", time="2026-11-30T12:00:00", pid=1), "events.0.time"),  # no zone
    (ev(1, "started", time="2026-13-45T12:00:00Z", pid=1), "events.0.time"),
    (ev(1, "result", summary={"text": "a\x00b"}), "events.0.data"),
    (ev(1, "result", summary={"a\x00": 1}), "events.0.data"),
    (ev(1, "result", summary="\ud800 lone surrogate"), "events.0.data"),
    (ev(1, "result", summary="x" * 300_000), "events.0.data"),
    (ev(1, "result", summary=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]), "events.0.data"),
    (ev(1, "result", refs=["a\x00"]), "events.0.data"),
    (ev(1, "lost", reason="r\x00"), "events.0.data"),
]


@pytest.mark.parametrize(("event", "field"), BAD_EVENTS, ids=[f"{f}{i}" for i, (_, f) in enumerate(BAD_EVENTS)])
def test_an_event_the_database_could_not_store_is_a_400_naming_the_field_and_seq(attempt, event, field):
    client = runner(attempt)
    body = json.dumps({"events": [event]}, ensure_ascii=True)  # \u0000 and \ud800 travel as JSON escapes
    response = client.generic("POST", "/runner/v1/events", body, content_type="application/json")
    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["code"] == "invalid"
    assert answer["errors"][0]["field"] == field, answer
    assert answer["rejected_seq"] == event["seq"]
    attempt.refresh_from_db()
    assert attempt.acked_seq == 0  # nothing of the batch was applied
    assert Task.objects.get(pk=attempt.task_id).state == "SUBMITTING"


def test_the_first_refused_event_of_a_batch_is_the_one_named(attempt):
    batch = [ev(1, "started", pid=4), ev(2, "progress", message="ok"), ev(3, "exited", exit_code=999)]
    response = runner(attempt).post("/runner/v1/events", {"events": batch}, format="json")
    assert response.status_code == 400
    assert response.json()["rejected_seq"] == 3 and response.json()["errors"][0]["field"] == "events.2.data.exit_code"


def test_valid_events_are_still_taken_with_their_times(attempt):
    batch = [
        ev(1, "started", time="2026-11-30T12:00:00+01:00", pid=4),
        ev(2, "progress", message="half", fraction=0.5, extra="kept"),
        ev(3, "result", summary={"rows": 3, "text": "ünïcode ✓"}, refs=["s3://bucket/out"]),
        ev(4, "exited", time="", exit_code=0, signal=None, reason="exited with code 0"),
    ]
    response = runner(attempt).post("/runner/v1/events", {"events": batch}, format="json")
    assert response.status_code == 200 and response.json()["acked_seq"] == 4
    task = Task.objects.get(pk=attempt.task_id)
    assert task.state == "SUCCEEDED"
    assert task.result == {"summary": {"rows": 3, "text": "ünïcode ✓"}, "refs": ["s3://bucket/out"]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"usage": {"cpu\x00": 1}}, "usage"),
        ({"usage": {"note": "x" * 20_000}}, "usage"),
        ({"child": {"state": "\x00"}}, "child"),
        ({"pid": -5}, "pid"),
    ],
)
def test_a_heartbeat_the_database_could_not_store_is_a_400(attempt, body, field):
    response = runner(attempt).generic(
        "POST", "/runner/v1/heartbeat", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field


def test_a_sync_event_the_database_could_not_store_is_replaced_by_its_refusal_not_the_batch(attempt):
    """A host agent reports every attempt in one request: one program's bad result must not stop the others."""
    body = {
        "protocol": 2,
        "attempts": [
            {
                "attempt": attempt.external_name,
                "events": [
                    ev(1, "started", pid=4),
                    ev(2, "result", summary={"text": "a\x00b"}),
                    ev(3, "exited", exit_code=900),
                ],
            }
        ],
    }
    response = runner(attempt).generic("POST", "/runner/v2/sync", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["attempts"][attempt.external_name]["acked_seq"] == 3
    task = Task.objects.get(pk=attempt.task_id)
    assert task.result in (None, {})
    refusal = task.events.get(type="progress").message
    assert refusal == "the server refused the result event: data: a text holds a NUL character (\\u0000)"
    assert task.state == "FAILED"  # the exited stand-in ends the attempt, without the impossible exit code
    assert "the server refused the exited event: data.exit_code" in task.state_reason


def test_a_sync_event_without_a_usable_seq_refuses_the_batch(attempt):
    body = {"protocol": 2, "attempts": [{"attempt": attempt.external_name, "events": [ev(0, "started")]}]}
    response = runner(attempt).generic("POST", "/runner/v2/sync", json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "attempts.0.events.0.seq"
