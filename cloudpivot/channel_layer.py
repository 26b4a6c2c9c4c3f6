"""The embedded default's channel layer: channels' in-memory layer, ringable from any thread.

channels' InMemoryChannelLayer keeps one asyncio.Queue per channel, bound to the event loop its reader
waits on; a message put into it from another thread would not wake that reader. The doorbells are sent
by a thread of their own (cloudpivot/ring_sender.py), so this layer remembers, for each channel in a
group, the loop it joined from (where its reader runs), and `send_threadsafe` hands each message to
that loop. It reaches listeners in this process only, as the in-memory layer always did.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer


class InProcessChannelLayer(InMemoryChannelLayer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pid = os.getpid()
        self.loops: dict[str, asyncio.AbstractEventLoop] = {}
        self._sending: set[asyncio.Task] = set()

    async def group_add(self, group: str, channel: str) -> None:
        await super().group_add(group, channel)
        self.loops[channel] = asyncio.get_running_loop()

    async def group_discard(self, group: str, channel: str) -> None:
        await super().group_discard(group, channel)
        if not any(channel in members for members in self.groups.values()):
            self.loops.pop(channel, None)

    async def flush(self) -> None:
        await super().flush()
        self.loops = {}

    def _remove_from_groups(self, channel: str) -> None:
        super()._remove_from_groups(channel)
        self.loops.pop(channel, None)

    def send_threadsafe(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        """Send each (group, message) to the group's members, each on its own loop; callable from any thread.

        A member whose loop has closed is skipped (its reader is gone), a full channel drops the message:
        doorbells are hints. The membership is read from this thread: copying a dict of str keys holds
        the GIL throughout, so it never sees a dict that changes size under it.
        """
        if os.getpid() != self.pid:  # a forked child: the parent's listeners are not here
            self.groups, self.channels, self.loops, self.pid = {}, {}, {}, os.getpid()
            return
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[str, dict[str, Any]]]] = {}
        for group, message in messages:
            for channel in tuple(self.groups.get(group, ())):
                loop = self.loops.get(channel)
                if loop is not None and not loop.is_closed():
                    by_loop.setdefault(loop, []).append((channel, message))
        for loop, sends in by_loop.items():
            try:
                loop.call_soon_threadsafe(self._start_sending, sends)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def _start_sending(self, sends: list[tuple[str, dict[str, Any]]]) -> None:
        """Runs in the listeners' loop: the coroutine is made there, so a closed loop leaves none un-awaited."""
        task = asyncio.get_running_loop().create_task(self._send_quietly(sends))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send_quietly(self, sends: list[tuple[str, dict[str, Any]]]) -> None:
        for channel, message in sends:
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass
