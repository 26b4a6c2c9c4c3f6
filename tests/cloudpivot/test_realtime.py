"""The doorbell: one ring per task per transaction, all of a transaction's rings in one hop, none for a rollback;
sent by one thread per process, which coalesces what waits and never holds up the committer."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connections, transaction

from cloudpivot import realtime, ring_sender
from cloudpivot.channel_layer import InProcessChannelLayer


@pytest.fixture
def rings(monkeypatch):
    """Each hop into the event loop, as the list of (group, message) it sends."""
    hops = []
    monkeypatch.setattr(realtime, "_send_each", lambda messages: hops.append(messages))
    return hops


@pytest.mark.django_db(transaction=True)
def test_events_of_one_transaction_ring_once_with_the_last_seq(rings):
    with transaction.atomic():
        for seq in (4, 5, 6):
            realtime.ring_on_commit(task_id="t1", project_id=9, seq=seq)
        realtime.ring_on_commit(task_id="t2", project_id=9, seq=1)
        assert rings == []  # nothing before commit
    [hop] = rings
    assert [(group, message["seq"]) for group, message in hop] == [
        ("task.t1", 6),
        ("project.9", 6),
        ("task.t2", 1),
        ("project.9", 1),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_batch_for_many_tasks_rings_in_one_hop_with_each_tasks_last_log_position(rings):
    with transaction.atomic():
        for task in ("t1", "t2", "t3"):
            with transaction.atomic():  # a savepoint per attempt, as a v2 sync batch applies them
                realtime.ring_on_commit(task_id=task, project_id=9, seq=3)
                realtime.ring_log_on_commit(task_id=task, position=10)
                realtime.ring_log_on_commit(task_id=task, position=25)
    [hop] = rings
    logs = [(group, message["positions"]) for group, message in hop if message["type"] == "task.logs"]
    assert logs == [(realtime.LOG_DOORBELL, {"t1": 25, "t2": 25, "t3": 25})]  # one message for every task
    assert len([m for _, m in hop if m["type"] == "task.changed"]) == 6


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_savepoint_drops_its_rings_and_the_others_ring(rings):
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            realtime.ring_log_on_commit(task_id="refused", position=5)
            raise RuntimeError
        with transaction.atomic():
            realtime.ring_log_on_commit(task_id="applied", position=7)
    [hop] = rings
    assert [(group, message["positions"]) for group, message in hop] == [(realtime.LOG_DOORBELL, {"applied": 7})]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_rings_nothing(rings):
    with pytest.raises(RuntimeError), transaction.atomic():
        realtime.ring_on_commit(task_id="t1", project_id=9, seq=1)
        raise RuntimeError
    with transaction.atomic():
        realtime.ring_on_commit(task_id="t1", project_id=9, seq=2)
    assert [[message["seq"] for _, message in hop] for hop in rings] == [[2, 2]]


# ---------------------------------------------------------------------------- the sender thread
def commit_rings(task_id: str, seq: int, position: int) -> None:
    with transaction.atomic():
        realtime.ring_on_commit(task_id=task_id, project_id=9, seq=seq)
        realtime.ring_log_on_commit(task_id=task_id, position=position)


async def listen(*groups: str) -> tuple[object, str]:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    for group in groups:
        await layer.group_add(group, channel)
    return layer, channel


async def received(layer, channel: str, count: int) -> list[dict]:
    return [await asyncio.wait_for(layer.receive(channel), timeout=5) for _ in range(count)]


@pytest.mark.django_db(transaction=True)
async def test_a_commit_in_a_request_thread_reaches_a_listener_on_the_event_loop():
    """As a view's commit does (sync_to_async); with PostgreSQL + Redis this goes through Redis."""
    layer, channel = await listen("task.rt1", "project.9", realtime.LOG_DOORBELL)
    await database_sync_to_async(commit_rings)("rt1", 4, 120)
    messages = await received(layer, channel, 3)
    assert sorted(messages, key=str) == sorted(
        [
            {"type": "task.changed", "task_id": "rt1", "seq": 4},
            {"type": "task.changed", "task_id": "rt1", "seq": 4},
            {"type": "task.logs", "positions": {"rt1": 120}},
        ],
        key=str,
    )
    for group in ("task.rt1", "project.9", realtime.LOG_DOORBELL):
        await layer.group_discard(group, channel)


@pytest.mark.django_db(transaction=True)
async def test_a_commit_in_a_thread_without_an_event_loop_reaches_the_listener_too():
    """A worker's or a management command's thread: no loop to hop into, still rung (the old async_to_sync
    hop sent on a loop of its own there, where the in-memory layer's listener never heard it)."""
    layer, channel = await listen("task.rt2", realtime.LOG_DOORBELL)

    def plain_thread() -> None:
        try:
            commit_rings("rt2", 2, 7)
        finally:
            connections.close_all()

    thread = threading.Thread(target=plain_thread)
    thread.start()
    await asyncio.get_running_loop().run_in_executor(None, thread.join)
    messages = await received(layer, channel, 2)
    assert {message["type"] for message in messages} == {"task.changed", "task.logs"}
    await layer.group_discard("task.rt2", channel)
    await layer.group_discard(realtime.LOG_DOORBELL, channel)


class GatedLayer(InProcessChannelLayer):
    """The in-process layer, holding the sender at its first batch until the gate opens."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.batches: list[list] = []

    def send_threadsafe(self, messages):
        self.entered.set()
        assert self.gate.wait(10)
        self.batches.append(messages)
        super().send_threadsafe(messages)


@pytest.fixture
def held_sender(monkeypatch):
    """A sender of its own whose layer lets the first batch through only when the test opens the gate."""
    layer = GatedLayer()
    monkeypatch.setattr(ring_sender, "get_channel_layer", lambda: layer)
    sender = ring_sender.RingSender()
    sender.put([("task.first", {"type": "task.log", "task_id": "first", "position": 1})])
    assert layer.entered.wait(5)
    return sender, layer


def log_ring(task_id: str, position: int):
    return (f"task.{task_id}", {"type": "task.log", "task_id": task_id, "position": position})


def changed_ring(task_id: str, seq: int):
    return (f"task.{task_id}", {"type": "task.changed", "task_id": task_id, "seq": seq})


def test_rings_that_wait_are_coalesced_per_task_newest_position_highest_seq(held_sender):
    sender, layer = held_sender
    sender.put([log_ring("a", 50), changed_ring("a", 4)])
    sender.put([log_ring("a", 90), changed_ring("a", 6), log_ring("b", 3)])
    sender.put([log_ring("a", 0), changed_ring("a", 5)])  # a new attempt's log; a seq committed out of order
    layer.gate.set()
    assert sender.wait_sent(timeout=5)
    assert layer.batches[0] == [log_ring("first", 1)]
    assert sorted(layer.batches[1], key=str) == sorted(
        [log_ring("a", 0), changed_ring("a", 6), log_ring("b", 3)], key=str
    )


def test_a_full_queue_drops_new_rings_and_says_so(held_sender, monkeypatch, caplog):
    sender, layer = held_sender
    monkeypatch.setattr(ring_sender, "MAX_PENDING", 2)
    with caplog.at_level(logging.WARNING, logger="cloudpivot.ring_sender"):
        sender.put([log_ring("a", 1), log_ring("b", 1), log_ring("c", 1)])
        sender.put([log_ring("a", 2)])  # one that waits already still takes the newest position
        layer.gate.set()
        assert sender.wait_sent(timeout=5)
    assert layer.batches[1] == [log_ring("a", 2), log_ring("b", 1)]
    assert "1 doorbells dropped" in caplog.text


def test_putting_a_ring_does_not_wait_for_the_layer(held_sender):
    sender, layer = held_sender  # the sender is stuck in its layer
    for position in range(1000):
        sender.put([log_ring("busy", position)])
    assert not sender.wait_sent(timeout=0.1)
    layer.gate.set()
    assert sender.wait_sent(timeout=5)
    assert layer.batches[1] == [log_ring("busy", 999)]


def test_a_forked_child_starts_a_sender_of_its_own():
    """qcluster forks its workers: the parent's thread is not in the child, so the child's first ring starts one."""
    parent = ring_sender.sender()
    pid = os.fork()
    if pid == 0:  # the child: no pytest here, only an exit code
        code = 1
        try:
            child = ring_sender.sender()
            child.put([log_ring("forked", 1)])
            if child is not parent and child.pid == os.getpid() and child.wait_sent(timeout=10):
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ring_sender.sender() is parent


def test_waiting_log_rings_of_many_tasks_are_merged_task_by_task(held_sender):
    """The log doorbell is one message per commit for all its tasks: what waits is merged, newest position wins."""
    sender, layer = held_sender
    sender.put([(realtime.LOG_DOORBELL, {"type": "task.logs", "positions": {"a": 5, "b": 7}})])
    sender.put([(realtime.LOG_DOORBELL, {"type": "task.logs", "positions": {"a": 9, "c": 1}})])
    layer.gate.set()
    assert sender.wait_sent(timeout=5)
    assert layer.batches[1] == [(realtime.LOG_DOORBELL, {"type": "task.logs", "positions": {"a": 9, "b": 7, "c": 1}})]
