"""A multi-byte character split across a Runner's read (two log chunks), a page of the log API or the
live-log websocket never shows as U+FFFD: its bytes wait for the rest, and the text is whole."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from cloudpivot.routing import websocket_urlpatterns
from tasks.consumers import TaskConsumer
from tests.builders import report, running, write_log

TEXT = "café — naïve 日本語 €uro 🎉 done\n"


def logs(api, task, **params):
    return api("bob").get(f"/api/v1/tasks/{task.pk}/logs", params).json()


@pytest.mark.django_db
def test_a_character_split_across_two_chunks_waits_for_its_second_half(world, api):
    task, attempt = running(world.bob)
    write_log(attempt, b"caf" + "é".encode()[:1])  # the Runner read the file mid-character
    first = logs(api, task)
    assert first["data"] == "caf" and first["next_offset"] == 3 and "\ufffd" not in first["data"]
    write_log(attempt, "é".encode()[1:] + b" ok\n")
    assert logs(api, task, offset=first["next_offset"])["data"] == "é ok\n"
    assert logs(api, task)["data"] == "café ok\n"


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [1, 2, 3, 5, 7])
def test_pages_of_any_size_never_cut_a_character(world, api, limit):
    task, attempt = running(world.bob)
    raw = TEXT.encode()
    for start in range(0, len(raw), 4):  # chunks of 4 bytes: most characters are split by a chunk boundary
        write_log(attempt, raw[start : start + 4])
    report(attempt, {"type": "exited", "data": {"exit_code": 0}})
    text, offset, pages = "", 0, 0
    while offset < len(raw):
        page = logs(api, task, offset=offset, limit=limit)
        assert "\ufffd" not in page["data"], (offset, page)
        assert page["next_offset"] > offset, page  # always moves on (a 4-byte character with a page of 1 too)
        text, offset, pages = text + page["data"], page["next_offset"], pages + 1
    assert text == TEXT


@pytest.mark.django_db
def test_a_character_split_around_the_other_streams_output_stays_whole(world, api):
    task, attempt = running(world.bob)
    euro = "€".encode()
    write_log(attempt, b"price: " + euro[:2])
    write_log(attempt, b"warning\n", stream="stderr")
    write_log(attempt, euro[2:] + b"12\n")
    both = logs(api, task)
    assert "\ufffd" not in both["data"]
    assert "€12\n" in both["data"] and "warning\n" in both["data"]
    assert logs(api, task, stream="stdout")["data"] == "price: €12\n"


@pytest.mark.django_db
def test_an_offset_inside_a_character_starts_at_the_next_one(world, api):
    task, attempt = running(world.bob)
    write_log(attempt, "日本".encode())
    assert logs(api, task, offset=1)["data"] == "本"


@pytest.mark.django_db
def test_bytes_that_are_not_utf8_still_show_once_the_attempt_ended(world, api):
    task, attempt = running(world.bob)
    write_log(attempt, b"bad \xff byte, cut \xe2\x82")
    report(attempt, {"type": "exited", "data": {"exit_code": 0}})
    page = logs(api, task)
    assert page["data"] == "bad \ufffd byte, cut \ufffd" and page["complete"] is True


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_live_log_websocket_never_sends_half_a_character(world, monkeypatch):
    monkeypatch.setattr(TaskConsumer, "poll_seconds", 0.2)
    db = database_sync_to_async
    task, attempt = await db(running)(world.bob)
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/tasks/{task.pk}/?log_attempt=1")
    comm.scope["user"] = world.bob
    await comm.connect(timeout=5)
    raw = TEXT.encode()
    received = ""
    for start in range(0, len(raw), 5):
        await db(write_log)(attempt, raw[start : start + 5])
        # what the websocket sends for this chunk (maybe nothing, if the chunk ends mid-character)
        while not await comm.receive_nothing(timeout=0.6):
            message = await comm.receive_json_from(timeout=1)
            if message["type"] == "log":
                assert "\ufffd" not in message["data"], message
                received += message["data"]
    assert received == TEXT
    await comm.disconnect()
