"""The log doorbell's fan-out: one channel per web process hears every "new log bytes" ring, and wakes the
websockets of this process that follow those tasks.

A batch of Runner reports adds log bytes to every running task at once. Ringing a group per task cost a
channel-layer send per task per batch (channels_redis: ~0.13 ms of CPU each, 100 tasks × 10 batches a
second, whether or not anyone watches), so a transaction rings once, for all its tasks
(realtime.LOG_DOORBELL: {"type": "task.logs", "positions": {task id: position}}), and each process
listens once: here, per event loop, for as long as one of its websockets follows a task. The ring stays a
hint: a consumer re-reads the database from its own position, and polls as well.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)
LOG_DOORBELL = "task-logs"
RETRY_SECONDS = 5.0

Listener = Callable[[int], None]


class _Hub:
    """One event loop's channel in LOG_DOORBELL and the listeners by task id."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.listeners: dict[str, set[Listener]] = {}
        self.channel: str | None = None
        self.joined = asyncio.Event()
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        while True:
            try:
                if self.channel is None:
                    channel = await self.layer.new_channel()
                    await self.layer.group_add(LOG_DOORBELL, channel)
                    self.channel = channel
                    self.joined.set()
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the layer is away (Redis): the consumers' polling covers it
                logger.warning("log doorbell: %s; listening again in %.0f s", exc, RETRY_SECONDS)
                self.channel = None
                self.joined.set()  # nobody waits for a layer that is away
                await asyncio.sleep(RETRY_SECONDS)
                continue
            for task_id, position in (message.get("positions") or {}).items():
                for listener in tuple(self.listeners.get(task_id, ())):
                    listener(position)

    async def close(self) -> None:
        self.reader.cancel()
        try:
            await self.reader
        except BaseException:
            pass
        if self.channel is not None:
            try:
                await self.layer.group_discard(LOG_DOORBELL, self.channel)
            except Exception as exc:
                logger.debug("log doorbell: leaving the group failed: %s", exc)


_hubs: dict[asyncio.AbstractEventLoop, _Hub] = {}


async def listen(task_id: Any, listener: Listener) -> None:
    """Call `listener(position)` when a ring says task `task_id` has log bytes up to `position`. Returns once
    this process hears the rings (or the layer is away), so a read made after it misses none."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        layer = get_channel_layer()
        if layer is None:
            return
        hub = _hubs[loop] = _Hub(layer)
    hub.listeners.setdefault(str(task_id), set()).add(listener)
    await hub.joined.wait()


async def unlisten(task_id: Any, listener: Listener) -> None:
    """The listener hears no more; the last one of the loop closes its channel."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        return
    listeners = hub.listeners.get(str(task_id), set())
    listeners.discard(listener)
    if not listeners:
        hub.listeners.pop(str(task_id), None)
    if not hub.listeners:
        del _hubs[loop]
        await hub.close()
