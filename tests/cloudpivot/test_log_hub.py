"""The log doorbell's fan-out (cloudpivot/log_hub.py): one channel per event loop hears every log ring and calls
the listeners of the tasks it names, through the configured layer (in-process, or Redis with REDIS_URL)."""

from __future__ import annotations

import asyncio

import pytest

from cloudpivot import log_hub, realtime, ring_sender

pytestmark = pytest.mark.asyncio


async def heard(calls: list, count: int) -> None:
    for _ in range(100):
        if len(calls) >= count:
            return
        await asyncio.sleep(0.05)


async def test_a_ring_for_many_tasks_reaches_each_tasks_listeners_once_and_no_others():
    first, second, other = [], [], []
    await log_hub.listen("t1", first.append)
    await log_hub.listen("t1", second.append)
    await log_hub.listen("t9", other.append)
    realtime._send_each([realtime._log_ring({"t1": 40, "t2": 7})])
    await heard(first, 1)
    await heard(second, 1)
    assert (first, second, other) == ([40], [40], [])
    for task_id, listener in (("t1", first.append), ("t1", second.append), ("t9", other.append)):
        await log_hub.unlisten(task_id, listener)
    assert asyncio.get_running_loop() not in log_hub._hubs  # the last listener closed the loop's channel


async def test_after_the_last_listener_left_nothing_is_called():
    calls = []
    await log_hub.listen("t3", calls.append)
    await log_hub.unlisten("t3", calls.append)
    realtime._send_each([realtime._log_ring({"t3": 1})])
    assert await asyncio.to_thread(ring_sender.sender().wait_sent, 5)
    await asyncio.sleep(0.3)
    assert calls == []
