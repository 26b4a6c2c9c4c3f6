"""The embedded default's channel layer: channels' in-memory layer, ringable from any thread, relayed between
the web processes of one `manage.py serve`.

channels' InMemoryChannelLayer keeps one asyncio.Queue per channel, bound to the event loop its reader
waits on; a message put into it from another thread would not wake that reader. The doorbells are sent
by a thread of their own (cloudpivot/ring_sender.py), so this layer remembers, for each channel in a
group, the loop it joined from (where its reader runs), and `send_threadsafe` hands each message to
that loop.

The relay (issue 11: the host agents have a web process of their own). `serve` names a datagram socket
(Linux abstract namespace) for each web process it starts and tells every child the names
(CLOUDPIVOT_LAYER_PEERS) and each web process its own (CLOUDPIVOT_LAYER_NAME). A web process listens on
its name with one thread; every process sends its rings to the other names too. So a submit's ring in
one web process reaches the agents' long-polls in another, and a task's change stored by an agent's
sync reaches the pages' websockets in the first: what Redis does in the scale-out mode, on one host,
without a server. A ring is a hint (the listeners re-read the database), so a datagram that cannot be
sent (no such socket yet, a full queue) is dropped. Without the variables it reaches this process only,
as the in-memory layer always did.

An abstract socket's name is no secret on the host, so a datagram is taken only from a process of the user
CloudPivot runs as (the kernel's SCM_CREDENTIALS, not what the sender says), and only rings of the kinds
cloudpivot/realtime.py sends (RING_TYPES); anything else is dropped and counted in the log at debug level.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
import threading
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

logger = logging.getLogger(__name__)

PEERS_ENV = "CLOUDPIVOT_LAYER_PEERS"  # comma-separated relay names of every web process of this serve
NAME_ENV = "CLOUDPIVOT_LAYER_NAME"  # this web process's own name (it listens there)
DATAGRAM_BYTES = 60_000  # rings are batched into datagrams up to this size (the kernel's limit is ~200 KB)

Ring = tuple[str, dict[str, Any]]
# What cloudpivot/realtime.py rings; nothing else is delivered from another process.
RING_TYPES = frozenset({"task.changed", "task.logs", "feed.new", "agent.doorbell", "reconcile.doorbell"})
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def relay_address(name: str) -> bytes:
    return b"\0" + name.encode()


class InProcessChannelLayer(InMemoryChannelLayer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pid = os.getpid()
        self.loops: dict[str, asyncio.AbstractEventLoop] = {}
        self._sending: set[asyncio.Task] = set()
        self.name = os.environ.get(NAME_ENV, "")
        self.peers = [name for name in os.environ.get(PEERS_ENV, "").split(",") if name and name != self.name]
        self._out: socket.socket | None = None
        if self.name:
            self._listen()

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

    def send_threadsafe(self, messages: list[Ring], *, relay: bool = True) -> None:
        """Send each (group, message) to the group's members, each on its own loop, and to the other web
        processes (`relay`); callable from any thread.

        A member whose loop has closed is skipped (its reader is gone), a full channel drops the message:
        doorbells are hints. The membership is read from this thread: copying a dict of str keys holds
        the GIL throughout, so it never sees a dict that changes size under it.
        """
        if os.getpid() != self.pid:  # a forked child (qcluster's workers): the parent's listeners are not here
            self.groups, self.channels, self.loops, self.pid, self._out = {}, {}, {}, os.getpid(), None
        if relay and self.peers:
            self._relay(messages)
        by_loop: dict[asyncio.AbstractEventLoop, list[Ring]] = {}
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

    def _start_sending(self, sends: list[Ring]) -> None:
        """Runs in the listeners' loop: the coroutine is made there, so a closed loop leaves none un-awaited."""
        task = asyncio.get_running_loop().create_task(self._send_quietly(sends))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send_quietly(self, sends: list[Ring]) -> None:
        for channel, message in sends:
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass

    # ------------------------------------------------------------------ the relay between web processes
    def _relay(self, messages: list[Ring]) -> None:
        """The rings to every peer, in datagrams of at most DATAGRAM_BYTES (one ring larger than that alone)."""
        if self._out is None:
            self._out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._out.setblocking(False)
        batches: list[bytes] = []
        batch: list[str] = []
        size = 0
        for group, message in messages:
            item = json.dumps([group, message], separators=(",", ":"))
            if batch and size + len(item) > DATAGRAM_BYTES:
                batches.append(("[" + ",".join(batch) + "]").encode())
                batch, size = [], 0
            batch.append(item)
            size += len(item) + 1
        if batch:
            batches.append(("[" + ",".join(batch) + "]").encode())
        for peer in self.peers:
            address = relay_address(peer)
            for datagram in batches:
                try:
                    self._out.sendto(datagram, address)
                except OSError:  # not listening (yet, or any more), or its queue is full: a hint lost
                    break

    def _listen(self) -> None:
        """Bind this process's relay name and deliver what the peers send, from a daemon thread."""
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # the kernel says who sent each datagram
        try:
            receiver.bind(relay_address(self.name))
        except OSError as exc:
            receiver.close()
            logger.warning(
                "channel layer relay %s unavailable (%s): rings from other processes are lost", self.name, exc
            )
            return
        thread = threading.Thread(target=self._receive, args=(receiver,), name="channel-layer-relay", daemon=True)
        thread.start()

    def _receive(self, receiver: socket.socket) -> None:
        me = os.getuid()
        while True:
            try:
                datagram, ancillary, _, _ = receiver.recvmsg(1 << 20, socket.CMSG_SPACE(_CREDENTIALS.size))
            except OSError:
                return
            sender = relay_sender_uid(ancillary)
            if sender != me:
                logger.debug("channel layer relay: a datagram from uid %s dropped (not CloudPivot's)", sender)
                continue
            try:
                messages = [(str(group), dict(message)) for group, message in json.loads(datagram)]
            except (ValueError, TypeError) as exc:
                logger.debug("channel layer relay: a datagram that is not rings (%s)", exc)
                continue
            messages = [(group, message) for group, message in messages if message.get("type") in RING_TYPES]
            if os.getpid() == self.pid:
                self.send_threadsafe(messages, relay=False)


def relay_sender_uid(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The sending process's uid, as the kernel attached it (None: no credentials came with the datagram)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _CREDENTIALS.size:
            return _CREDENTIALS.unpack(data[: _CREDENTIALS.size])[1]
    return None
