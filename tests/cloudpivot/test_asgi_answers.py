"""The outer ASGI wrappers' refusals (cloudpivot/asgi_answers.py), in process: the API's error shape under /api and
/runner with each wrapper's own headers, and a page elsewhere that shows the message as text."""

from __future__ import annotations

import json

from cloudpivot.body_limits import BodyLimit
from cloudpivot.shedding import LoadShedder


async def never_called(scope, receive, send):  # the refusal comes before the application
    raise AssertionError("the application was reached")


async def answer(app, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, list, bytes]:
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    await app({"type": "http", "path": path, "headers": headers}, None, send)
    assert [message["type"] for message in sent] == ["http.response.start", "http.response.body"]
    return sent[0]["status"], sent[0]["headers"], sent[1]["body"]


async def test_a_declared_length_over_the_limit_is_the_apis_error_with_connection_close():
    status, headers, body = await answer(BodyLimit(never_called), "/api/v1/tasks", [(b"content-length", b"9999999")])
    message = "the request body is 9999999 bytes; at most 2621440 are accepted here"
    assert status == 413
    assert (
        body
        == json.dumps(
            {"code": "request_too_large", "message": message, "errors": [{"field": "", "message": message}]}
        ).encode()
    )
    assert headers == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]


async def test_a_page_shows_the_refusal_as_text_not_as_markup_the_client_sent():
    status, headers, body = await answer(BodyLimit(never_called), "/tasks/", [(b"content-length", b"<b>x</b>")])
    assert status == 400
    assert dict(headers)[b"content-type"] == b"text/html; charset=utf-8"
    assert b"<b>" not in body and b"&lt;b&gt;x&lt;/b&gt;" in body


async def test_the_busy_answer_keeps_its_shape_and_headers():
    shedder = LoadShedder(never_called, max_in_flight=1, max_queued=0, queue_wait=1)
    shedder.in_flight = 1  # full, and no queue: shed at once
    status, headers, body = await answer(shedder, "/runner/v2/heartbeat", [])
    assert (status, json.loads(body)) == (
        503,
        {"code": "overloaded", "message": "the server is busy: try again in 2 s", "errors": []},
    )
    assert headers == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"2"),
        (b"cache-control", b"no-store"),
    ]
    status, headers, body = await answer(shedder, "/tasks/", [])
    assert status == 503 and b"The server is busy" in body
    assert dict(headers)[b"content-type"] == b"text/html; charset=utf-8" and dict(headers)[b"retry-after"] == b"2"
