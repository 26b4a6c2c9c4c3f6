"""Websocket consumers with channels.testing.WebsocketCommunicator (in-memory channel layer).

The task stream: everything after the client's positions, then new data, found by the
doorbell or by the consumer's own polling; a reconnect resumes without gaps or duplicates.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from cloudpivot import realtime
from cloudpivot.asgi import application
from cloudpivot.routing import websocket_urlpatterns
from tasks.consumers import DashboardConsumer, TaskConsumer
from tasks.portal import LOG_TAIL_BYTES
from tasks.services.actions import task_cancel, task_retry
from tests.builders import admit, finished, report, running, submit, write_log

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]
db = database_sync_to_async
router = URLRouter(websocket_urlpatterns)


def communicator(path: str, user) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(router, path)
    comm.scope["user"] = user
    return comm


async def collect(comm: WebsocketCommunicator, done, timeout: float = 10) -> list[dict]:
    """Receive messages until done(messages) is true; fail after `timeout` seconds."""
    messages: list[dict] = []
    deadline = time.monotonic() + timeout
    while not done(messages):
        left = deadline - time.monotonic()
        assert left > 0, f"timed out; got {messages}"
        try:
            messages.append(await comm.receive_json_from(timeout=left))
        except TimeoutError:
            raise AssertionError(f"timed out; got {messages}") from None
    return messages


def log_text(messages: list[dict], attempt: int = 1) -> str:
    return "".join(m["data"] for m in messages if m["type"] == "log" and m["attempt"] == attempt)


def has_state(state: str):
    return lambda messages: any(m["type"] == "state" and m["state"] == state for m in messages)


async def expect_close(comm: WebsocketCommunicator, code: int) -> None:
    connected, _ = await comm.connect(timeout=5)
    assert connected  # accepted, then closed with the code, so a browser sees it
    assert await comm.receive_output(timeout=3) == {"type": "websocket.close", "code": code}


@pytest.fixture
def fast_poll(monkeypatch):
    monkeypatch.setattr(TaskConsumer, "poll_seconds", 0.2)
    monkeypatch.setattr(DashboardConsumer, "poll_seconds", 0.2)


# ---------------------------------------------------------------------------- who may connect
async def test_it_refuses_anonymous_users_with_4401(world):
    from django.contrib.auth.models import AnonymousUser

    task = await db(submit)(world.bob)
    await expect_close(communicator(f"/ws/tasks/{task.pk}/", AnonymousUser()), 4401)
    await expect_close(communicator("/ws/dashboard/", AnonymousUser()), 4401)


async def test_it_closes_with_4404_for_foreign_and_missing_tasks(world):
    task = await db(submit)(world.bob)
    await expect_close(communicator(f"/ws/tasks/{task.pk}/", world.charlie), 4404)
    await expect_close(communicator(f"/ws/tasks/{uuid.uuid4()}/", world.bob), 4404)


async def test_a_reader_may_follow_a_task(world):
    task = await db(submit)(world.bob)
    comm = communicator(f"/ws/tasks/{task.pk}/", world.rita)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    messages = await collect(comm, has_state("PENDING"))
    assert [m["seq"] for m in messages if m["type"] == "event"] == [1]
    await comm.disconnect()


async def test_the_real_asgi_stack_authenticates_by_the_session_cookie(world):
    task = await db(submit)(world.bob)

    def session_cookie():
        client = Client()
        client.force_login(world.bob)
        return client.cookies["sessionid"].value

    origin = (b"origin", b"http://127.0.0.1")
    anonymous = WebsocketCommunicator(application, f"/ws/tasks/{task.pk}/", headers=[origin])
    await expect_close(anonymous, 4401)
    cookie = (b"cookie", f"sessionid={await db(session_cookie)()}".encode())
    comm = WebsocketCommunicator(application, f"/ws/tasks/{task.pk}/", headers=[origin, cookie])
    connected, _ = await comm.connect(timeout=5)
    assert connected
    await collect(comm, has_state("PENDING"))
    await comm.disconnect()
    foreign = WebsocketCommunicator(application, f"/ws/tasks/{task.pk}/", headers=[(b"origin", b"http://evil.test")])
    connected, _ = await foreign.connect(timeout=5)
    assert not connected  # another site's page may not open the stream with the user's cookie


# ---------------------------------------------------------------------------- history and positions
async def test_it_sends_everything_after_the_given_positions(world):
    task = await db(finished)(world.bob, log=b"0123456789abcdef\n")
    comm = communicator(f"/ws/tasks/{task.pk}/?after_seq=2&log_attempt=1&log_position=10", world.bob)
    await comm.connect(timeout=5)
    messages = await collect(comm, lambda ms: any(m["type"] == "log" for m in ms))
    seqs = [m["seq"] for m in messages if m["type"] == "event"]
    assert seqs == list(range(3, task.last_event_seq + 1))
    state = next(m for m in messages if m["type"] == "state")
    assert state["state"] == "SUCCEEDED" and state["terminal"] and state["badge"] == "green"
    assert state["seq"] == task.last_event_seq
    log = [m for m in messages if m["type"] == "log"]
    assert log == [{"type": "log", "attempt": 1, "position": 10, "next_position": 17, "data": "abcdef\n"}]
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()


async def test_it_follows_new_events_state_and_log_text(world, fast_poll):
    task, attempt = await db(running)(world.bob)
    comm = communicator(f"/ws/tasks/{task.pk}/?after_seq={task.last_event_seq}", world.bob)
    await comm.connect(timeout=5)
    await collect(comm, has_state("RUNNING"))
    await db(write_log)(attempt, b"first line\n")
    messages = await collect(comm, lambda ms: log_text(ms) == "first line\n")
    await db(write_log)(attempt, b"second line\n")
    await db(report)(attempt, {"type": "exited", "data": {"exit_code": 0}})
    messages = await collect(comm, lambda ms: log_text(ms) == "second line\n" and has_state("SUCCEEDED")(ms))
    assert [m["position"] for m in messages if m["type"] == "log"] == [11]
    assert any(m["type"] == "event" and m["event"] == "state" and m["data"]["to"] == "SUCCEEDED" for m in messages)
    await comm.disconnect()


async def test_the_doorbell_wakes_the_stream_without_waiting_for_the_poll(world, monkeypatch):
    monkeypatch.setattr(TaskConsumer, "poll_seconds", 60)
    task, attempt = await db(running)(world.bob)
    comm = communicator(f"/ws/tasks/{task.pk}/?after_seq={task.last_event_seq}", world.bob)
    await comm.connect(timeout=5)
    await collect(comm, has_state("RUNNING"))
    started = time.monotonic()
    await db(write_log)(attempt, b"rung\n")
    await collect(comm, lambda ms: log_text(ms) == "rung\n", timeout=5)
    await db(task_cancel)(task_id=task.pk, user=world.bob)
    await collect(comm, has_state("CANCELLING"), timeout=5)
    assert time.monotonic() - started < 30  # well before the 60 s poll: the doorbell woke it
    await comm.disconnect()


async def test_polling_finds_changes_when_the_doorbell_is_lost(world, fast_poll, monkeypatch):
    """Daphne and the workers are separate processes: with the in-memory layer no doorbell arrives."""
    monkeypatch.setattr(realtime, "_send_each", lambda messages: None)
    task, attempt = await db(running)(world.bob)
    comm = communicator(f"/ws/tasks/{task.pk}/?after_seq={task.last_event_seq}", world.bob)
    await comm.connect(timeout=5)
    await collect(comm, has_state("RUNNING"))
    await db(write_log)(attempt, b"silent\n")
    await db(report)(attempt, {"type": "exited", "data": {"exit_code": 3}})
    messages = await collect(comm, lambda ms: log_text(ms) == "silent\n" and has_state("FAILED")(ms), timeout=5)
    assert any(m["type"] == "event" and m["event"] == "state" for m in messages)
    await comm.disconnect()


async def test_a_reconnect_resumes_without_gaps_or_duplicates(world, fast_poll):
    task, attempt = await db(running)(world.bob)
    comm = communicator(f"/ws/tasks/{task.pk}/", world.bob)
    await comm.connect(timeout=5)
    await db(write_log)(attempt, b"a" * 1000)
    first = await collect(comm, lambda ms: len(log_text(ms)) == 1000)
    await comm.disconnect()
    # While the client is away: more log in several chunks, a progress event, the end.
    for piece in (b"b" * 500, b"c" * 500, b"tail\n"):
        await db(write_log)(attempt, piece)
    await db(report)(
        attempt, {"type": "progress", "data": {"message": "half way"}}, {"type": "exited", "data": {"exit_code": 0}}
    )
    last_seq = max(m["seq"] for m in first if m["type"] == "event")
    position = max(m["next_position"] for m in first if m["type"] == "log")
    comm = communicator(f"/ws/tasks/{task.pk}/?after_seq={last_seq}&log_attempt=1&log_position={position}", world.bob)
    await comm.connect(timeout=5)
    second = await collect(comm, lambda ms: has_state("SUCCEEDED")(ms) and log_text(ms).endswith("tail\n"))
    assert await comm.receive_nothing(timeout=0.6)
    await comm.disconnect()
    both = first + second
    assert log_text(both) == "a" * 1000 + "b" * 500 + "c" * 500 + "tail\n"
    seqs = [m["seq"] for m in both if m["type"] == "event"]
    assert seqs == list(range(1, len(seqs) + 1))  # every event once, in order
    task = await db(lambda: type(task).objects.get(pk=task.pk))()
    assert seqs[-1] == task.last_event_seq
    logs = [m for m in both if m["type"] == "log"]
    assert all(a["next_position"] == b["position"] for a, b in zip(logs, logs[1:], strict=False))


async def test_a_new_attempt_starts_its_log_from_zero(world, fast_poll):
    task = await db(finished)(world.bob, exit_code=1, log=b"first attempt\n")
    query = f"after_seq={task.last_event_seq}&log_attempt=1&log_position=14"
    comm = communicator(f"/ws/tasks/{task.pk}/?{query}", world.bob)
    await comm.connect(timeout=5)
    await collect(comm, has_state("FAILED"))

    def retry_and_log():
        task_retry(task_id=task.pk, user=world.bob)
        attempt = admit(task)
        write_log(attempt, b"second attempt\n")

    await db(retry_and_log)()
    messages = await collect(comm, lambda ms: log_text(ms, attempt=2) == "second attempt\n")
    log = next(m for m in messages if m["type"] == "log")
    assert log["attempt"] == 2 and log["position"] == 0
    await comm.disconnect()


async def test_a_long_backlog_is_skipped_to_its_tail(world):
    task, attempt = await db(running)(world.bob)
    for _ in range(16):
        await db(write_log)(attempt, b"x" * 64 * 1024)
    total = 16 * 64 * 1024
    comm = communicator(f"/ws/tasks/{task.pk}/?log_attempt=1&log_position=0", world.bob)
    await comm.connect(timeout=5)
    messages = await collect(comm, lambda ms: ms and ms[-1].get("next_position") == total)
    logs = [m for m in messages if m["type"] == "log"]
    assert logs[0]["position"] == total - LOG_TAIL_BYTES
    assert sum(len(m["data"]) for m in logs) == LOG_TAIL_BYTES
    assert max(len(m["data"]) for m in logs) <= 64 * 1024
    await comm.disconnect()


async def test_a_user_removed_from_the_project_is_disconnected(world, fast_poll):
    from cloudpivot.accounts.models import Membership

    task = await db(submit)(world.bob)
    comm = communicator(f"/ws/tasks/{task.pk}/", world.rita)
    await comm.connect(timeout=5)
    await collect(comm, has_state("PENDING"))
    await db(Membership.objects.filter(user=world.rita).delete)()
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}


# ---------------------------------------------------------------------------- dashboard
async def test_the_dashboard_streams_state_changes_in_my_projects(world, fast_poll):
    since = timezone.now().isoformat()
    mine = await db(submit)(world.bob, name="mine")
    bob = communicator(f"/ws/dashboard/?since={since}", world.bob)
    charlie = communicator(f"/ws/dashboard/?since={since}", world.charlie)
    await bob.connect(timeout=5)
    await charlie.connect(timeout=5)
    first = await collect(bob, lambda ms: any(m["task_id"] == str(mine.pk) for m in ms))
    assert first[0]["state"] == "PENDING" and first[0]["owner"] == "bob" and first[0]["url"] == f"/tasks/{mine.pk}/"
    alices = await db(submit)(world.alice, name="alices")
    await db(task_cancel)(task_id=alices.pk, user=world.alice)
    messages = await collect(
        bob, lambda ms: any(m["task_id"] == str(alices.pk) and m["state"] == "CANCELLED" for m in ms)
    )
    seqs = [m["seq"] for m in messages if m["task_id"] == str(alices.pk)]
    assert seqs == sorted(set(seqs))  # never the same news twice
    assert await charlie.receive_nothing(timeout=0.6)  # beta's member hears nothing about alpha
    await bob.disconnect()
    await charlie.disconnect()


async def test_the_dashboard_doorbell_is_enough_without_polling(world, monkeypatch):
    monkeypatch.setattr(DashboardConsumer, "poll_seconds", 60)
    comm = communicator(f"/ws/dashboard/?since={timezone.now().isoformat()}", world.bob)
    await comm.connect(timeout=5)
    task = await db(submit)(world.bob)
    await db(task_cancel)(task_id=task.pk, user=world.bob)
    await collect(comm, lambda ms: any(m["state"] == "CANCELLED" for m in ms), timeout=5)
    await comm.disconnect()


@pytest.mark.parametrize(
    "since", ["2026-13-45T00:00:00%2B00:00", "0001-01-01T00:00:00%2B00:00", "9999-12-31T23:59:59%2B00:00", "x" * 5000]
)
async def test_a_since_out_of_range_or_not_a_date_is_taken_within_limits_and_the_socket_opens(world, since):
    from tasks.consumers import SINCE_AT_MOST, dashboard_since

    comm = communicator(f"/ws/dashboard/?since={since}", world.bob)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    await comm.disconnect()
    now = timezone.now()
    taken = dashboard_since(since.replace("%2B", "+"))
    assert now - SINCE_AT_MOST - dt.timedelta(seconds=5) <= taken <= now + dt.timedelta(seconds=1)
