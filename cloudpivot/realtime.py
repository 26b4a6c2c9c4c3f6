"""The doorbell: tell websocket listeners that a task has something new.

The database is the record; a lost ring costs a client nothing but latency (consumers
re-read the database from their last position), so ringing never raises. Ringing only hands
the rings to this process's sender thread (cloudpivot/ring_sender.py), which sends them.

Messages (channel layer, JSON-native):
- to `task.<task id>`:    {"type": "task.changed", "task_id", "seq"}   a new TaskEvent (state changes included)
- to `project.<project id>`: {"type": "task.changed", "task_id", "seq"}  for dashboards and lists
- to `task-logs` (LOG_DOORBELL): {"type": "task.logs", "positions": {task id: position}}   new log bytes up to
  `position`, for every task of a transaction in one message; each web process hears it once and wakes its
  websockets (cloudpivot/log_hub.py)
- to `feed-doorbell` (FEED_DOORBELL): {"type": "feed.new"}   a transaction wrote entries of the event feed; the
  feed's long-polls look (notifications/api/long_poll.py)
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import select
import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers, get_channel_layer
from django.db import connections, transaction

from cloudpivot import ring_sender
from cloudpivot.log_hub import LOG_DOORBELL

logger = logging.getLogger(__name__)
# How long the reconcile relay gives a shared layer to forget its channel.
RING_TIMEOUT_SECONDS = 1.0


def task_group(task_id: Any) -> str:
    return f"task.{task_id}"


def project_group(project_id: Any) -> str:
    return f"project.{project_id}"


def _send(groups: list[str], message: dict[str, Any]) -> None:
    _send_each([(group, message) for group in groups])


def _send_each(messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Hand (group, message) pairs to this process's sender thread (cloudpivot/ring_sender.py): the caller
    (a commit hook, a request's thread) never waits for the channel layer. Never raises."""
    if not messages:
        return
    try:
        ring_sender.sender().put(messages)
    except Exception as exc:  # e.g. no thread can be started at interpreter exit
        logger.warning("doorbell %s lost (%s); listeners re-read the database", messages[0][1].get("type"), exc)


def ring(*, task_id: Any, project_id: Any, seq: int) -> None:
    message = {"type": "task.changed", "task_id": str(task_id), "seq": seq}
    _send([task_group(task_id), project_group(project_id)], message)


def ring_on_commit(*, task_id: Any, project_id: Any, seq: int) -> None:
    """Ring once the transaction commits; many events of one task in one transaction ring once, with the last seq.

    A rolled-back transaction drops its hooks, and with them the pending ring.
    """
    rings = _pending_rings()
    previous = rings.changed.get(task_id)
    rings.changed[task_id] = (project_id, max(seq, previous[1]) if previous else seq)


def ring_log_on_commit(*, task_id: Any, position: int) -> None:
    """Ring the log doorbell once the transaction commits, with the task's last position."""
    rings = _pending_rings()
    rings.logs[task_id] = max(position, rings.logs.get(task_id, 0))


class _Rings:
    """The doorbells one transaction rings at commit, handed to the sender in one go: a batch of Runner
    reports for many tasks rings each task once, with its last seq and log position. Registered in a savepoint that is
    rolled back, it goes with it (what it held was rolled back too; a later ring registers a new one)."""

    def __init__(self) -> None:
        self.changed: dict[Any, tuple[Any, int]] = {}
        self.logs: dict[Any, int] = {}
        self.feed = False

    def __call__(self) -> None:
        messages = []
        for task_id, (project_id, seq) in self.changed.items():
            message = {"type": "task.changed", "task_id": str(task_id), "seq": seq}
            messages += [(task_group(task_id), message), (project_group(project_id), message)]
        if self.logs:
            messages.append(_log_ring({str(task_id): position for task_id, position in self.logs.items()}))
        if self.feed:
            messages.append((FEED_DOORBELL, FEED_RING))
        _send_each(messages)


def _pending_rings() -> _Rings:
    connection = transaction.get_connection()
    for _savepoints, hook, _robust in connection.run_on_commit:  # Django 5: (savepoint ids, callable, robust)
        if isinstance(hook, _Rings):
            return hook
    hook = _Rings()
    transaction.on_commit(hook)
    return hook


# The event feed's long-polls listen here: "entries were written" (whose, they look up in the database).
FEED_DOORBELL = "feed-doorbell"
FEED_RING = {"type": "feed.new"}


def ring_feed_on_commit() -> None:
    """Ring the feed's doorbell once the transaction that writes feed entries commits (at once outside one)."""
    if not transaction.get_connection().in_atomic_block:
        _send([FEED_DOORBELL], FEED_RING)
        return
    _pending_rings().feed = True


async def ring_or_timeout(channel: str | None, timeout: float) -> str | None:
    """Wait up to `timeout` for a ring on `channel` (from `listening`), or sleep without one. The channel to
    wait on next time: None once the layer failed (the caller then looks at the database on the clock)."""
    try:
        if channel:
            await asyncio.wait_for(get_channel_layer().receive(channel), timeout=timeout)
        else:
            await asyncio.sleep(timeout)
    except TimeoutError:
        pass
    except Exception as exc:
        logger.warning("doorbell unavailable (%s: %s); looking on the clock", type(exc).__name__, exc)
        return None
    return channel


@asynccontextmanager
async def listening(group: str) -> AsyncIterator[str | None]:
    """A channel in `group` for the duration; None without a channel layer or when it fails (the caller then
    looks at the database on the clock: a doorbell is a hint, the database the truth)."""
    layer = get_channel_layer()
    channel = None
    if layer is not None:
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
        except Exception as exc:  # a doorbell is a hint; the database look still finds the news
            logger.warning("doorbell %s unavailable (%s: %s); polling", group, type(exc).__name__, exc)
            channel = None
    try:
        yield channel
    finally:
        if channel:
            try:
                await layer.group_discard(group, channel)
            except Exception as exc:  # Redis went away meanwhile: its groups expire on their own
                logger.warning("could not leave the doorbell group %s: %s: %s", group, type(exc).__name__, exc)


def ring_log(*, task_id: Any, position: int) -> None:
    _send_each([_log_ring({str(task_id): position})])


def _log_ring(positions: dict[str, int]) -> tuple[str, dict[str, Any]]:
    return LOG_DOORBELL, {"type": "task.logs", "positions": positions}


# Host agents' long-polls (runner_api/sync_view.py) listen here: "something for an agent may have changed".
AGENT_DOORBELL = "agent-doorbell"
# A long-poll that answered this recently is on its way back, and looks at the database first when it
# arrives: between two long-polls a ring needs no poke (docs/decisions.md, "Coalesced wake-ups").
AGENT_RETURNS_SECONDS = 1.0
_long_poll_answered_at = -AGENT_RETURNS_SECONDS


def long_poll_answered() -> None:
    """An agent's long-poll in this process answered: the agent sends the next one at once."""
    global _long_poll_answered_at
    _long_poll_answered_at = time.monotonic()


def ring_agents() -> bool:
    """Ring the agents' doorbell; True when a long-poll listens in this very process (the in-process layer),
    or answered so recently that the agent's next one, which looks first, is under way.

    With the in-process layer a ring reaches only this process's long-polls, and those of the other web
    processes of `manage.py serve` (the relay, cloudpivot/channel_layer.py: among them the one the host
    agents talk to, whose long-polls listen before they look): a caller that gets False pokes the agent
    on this host directly (clusters/backends/local.py). With Redis it reaches them all.
    """
    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer) and not layer.groups.get(AGENT_DOORBELL):
        if getattr(layer, "peers", None):
            _send([AGENT_DOORBELL], {"type": "agent.doorbell"})
            return True
        return time.monotonic() - _long_poll_answered_at < AGENT_RETURNS_SECONDS  # nothing to send here
    _send([AGENT_DOORBELL], {"type": "agent.doorbell"})
    return True


# The reconciler (tasks/services/ticker.py) sleeps while nothing is due and wakes on this doorbell.
RECONCILE_DOORBELL = "reconcile-doorbell"


def ring_reconciler() -> None:
    """Wake the reconciler: a datagram to the ticker on this host, and the channel layer for other hosts."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(b"!", reconcile_address())
    except OSError:  # no ticker listens on this host (or its queue is full: it is awake anyway)
        pass
    layer = get_channel_layer()
    if layer is not None and not isinstance(layer, InMemoryChannelLayer):
        _send([RECONCILE_DOORBELL], {"type": "reconcile.doorbell"})


def reconcile_address() -> bytes:
    """A Linux abstract socket name per database: every process of one installation on this host rings the same."""
    settings_dict = connections["default"].settings_dict
    identity = "|".join(str(settings_dict.get(key) or "") for key in ("ENGINE", "NAME", "HOST", "PORT"))
    return b"\0cloudpivot-reconcile-" + hashlib.sha256(identity.encode()).hexdigest()[:24].encode()


class ReconcileDoorbell:
    """What the ticker sleeps on: `wait(timeout)` returns early when `ring_reconciler` rang meanwhile.

    Rings are kept while the ticker works (datagrams queue in the socket, messages in its channel), so
    a ring during a pass is never lost: the next wait returns at once. With a shared (Redis) channel
    layer a small thread relays the channel's messages into the socket, so there is one thing to wait on.
    The thread receives on a loop of its own, so through a layer instance of its own: channels_redis
    refuses a second loop's receive on one instance ("Two event loops are trying to receive() on one
    channel layer at once"), and the process's instance is the websockets' and long-polls' (a consumer
    that connected while a ticker ran in its process died of it).
    If the socket cannot be had (another ticker on this host holds it) waits simply time out.
    """

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.relay: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> ReconcileDoorbell:
        try:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.sock.bind(reconcile_address())
            self.sock.setblocking(False)
        except OSError as exc:
            logger.warning("the reconcile doorbell is not available on this host (%s); polling instead", exc)
            if self.sock is not None:
                self.sock.close()
            self.sock = None
            return self
        layer = get_channel_layer()
        if layer is not None and not isinstance(layer, InMemoryChannelLayer):
            self.loop = asyncio.new_event_loop()
            own = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)  # never the process's: see the docstring
            self.relay = threading.Thread(target=self._relay, args=(own,), name="reconcile-doorbell", daemon=True)
            self.relay.start()
        return self

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True if the doorbell rang (all queued rings are taken)."""
        if self.sock is None:
            time.sleep(max(0.0, timeout))
            return False
        readable, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not readable:
            return False
        try:
            while self.sock.recv(16):
                pass
        except OSError:
            pass
        return True

    def __exit__(self, *exc_info: Any) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            if self.relay is not None:
                self.relay.join(timeout=2)
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _relay(self, layer: Any) -> None:
        """Channel layer → our socket, until __exit__ stops the loop; a Redis outage only costs promptness."""
        address = reconcile_address()
        assert self.loop is not None

        async def relay() -> None:
            channel = None
            try:
                while True:
                    try:
                        if channel is None:
                            channel = await layer.new_channel()
                            await layer.group_add(RECONCILE_DOORBELL, channel)
                        await layer.receive(channel)
                        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                            sock.setblocking(False)
                            sock.sendto(b"!", address)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        logger.debug("reconcile doorbell relay: %s", exc)
                        channel = None
                        await asyncio.sleep(5)
            finally:
                if channel is not None:  # a dead channel left in the group would cost every later ring
                    try:
                        await asyncio.wait_for(layer.group_discard(RECONCILE_DOORBELL, channel), RING_TIMEOUT_SECONDS)
                    except Exception:
                        pass

        asyncio.set_event_loop(self.loop)
        task = self.loop.create_task(relay())
        try:
            self.loop.run_forever()
        finally:
            task.cancel()
            try:
                self.loop.run_until_complete(task)
            except BaseException:
                pass
            self.loop.close()
