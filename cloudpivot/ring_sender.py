"""The doorbells' sender: one daemon thread per process sends what the commit hooks hand it.

A ring sent by the thread that committed cost a hop into an event loop (`async_to_sync`), 20–35 % of a
REST submit's CPU, and where no loop could be had it failed and left an un-awaited coroutine behind. Now
a commit hook only puts its rings here (a dict and a lock) and returns; this thread sends them:
- rings are coalesced per group, kind and task while they wait (a task's newest seq and log position is
  all a listener needs: it re-reads the database from its own position);
- the queue is bounded: when MAX_PENDING rings wait, new ones are dropped (the database is the record,
  listeners also poll);
- with the in-process layer (cloudpivot/channel_layer.py) the rings go to the listeners' own loops;
  with a shared layer (channels_redis, whose connections belong to one event loop) the thread sends
  through a layer instance of its own, on its own loop, giving up on a batch after RING_TIMEOUT_SECONDS.

The thread starts on the first ring in each process, so a forked child (qcluster's workers) starts its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers, get_channel_layer

logger = logging.getLogger(__name__)

Ring = tuple[str, dict[str, Any]]  # (group, message)

MAX_PENDING = 10_000
# A batch that a shared layer does not take within this long is given up (Redis away: listeners poll).
RING_TIMEOUT_SECONDS = 1.0
# A layer that keeps failing is reported at most this often.
WARN_EVERY_SECONDS = 60.0


def _key(group: str, message: dict[str, Any]) -> tuple[str, Any, Any]:
    return group, message.get("type"), message.get("task_id")


def _merged(waiting: dict[str, Any], newer: dict[str, Any]) -> dict[str, Any]:
    """The newer ring wins (a log position restarts at 0 on a new attempt), but never with an older seq; rings
    of log positions of many tasks (realtime.LOG_DOORBELL) are merged task by task, the newer position winning."""
    if "seq" in waiting and "seq" in newer and waiting["seq"] > newer["seq"]:
        return {**newer, "seq": waiting["seq"]}
    if "positions" in waiting and "positions" in newer:
        return {**newer, "positions": {**waiting["positions"], **newer["positions"]}}
    return newer


class RingSender:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, Any, Any], Ring] = {}
        self._dropped = 0
        self._wake = threading.Event()
        self._put_count = 0
        self._sent_count = 0
        self._sent = threading.Condition(self._lock)
        self._warned_at: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, name="doorbell-sender", daemon=True)
        self._thread.start()

    def put(self, rings: list[Ring]) -> None:
        """Hand rings over to be sent; returns at once."""
        with self._lock:
            for group, message in rings:
                key = _key(group, message)
                waiting = self._waiting.get(key)
                if waiting is not None:
                    self._waiting[key] = (group, _merged(waiting[1], message))
                elif len(self._waiting) < MAX_PENDING:
                    self._waiting[key] = (group, message)
                else:
                    self._dropped += 1
            self._put_count += 1
        self._wake.set()

    def wait_sent(self, timeout: float) -> bool:
        """Wait until everything put so far has been sent (or given up on); False on timeout. For tests."""
        deadline = time.monotonic() + timeout
        with self._sent:
            target = self._put_count
            while self._sent_count < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._sent.wait(left)
        return True

    def _take(self) -> tuple[list[Ring], int, int]:
        self._wake.wait()
        with self._lock:
            self._wake.clear()
            rings, self._waiting = list(self._waiting.values()), {}
            dropped, self._dropped = self._dropped, 0
            return rings, dropped, self._put_count

    def _done(self, count: int) -> None:
        with self._sent:
            self._sent_count = count
            self._sent.notify_all()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        own_layer = None
        while True:
            rings, dropped, count = self._take()
            try:
                if dropped:
                    self._warn("dropped", f"{dropped} doorbells dropped (more than {MAX_PENDING} waiting)")
                layer = get_channel_layer()
                if layer is None or not rings:
                    continue
                if hasattr(layer, "send_threadsafe"):
                    layer.send_threadsafe(rings)
                elif isinstance(layer, InMemoryChannelLayer):
                    self._warn(
                        "in-memory",
                        "channels' InMemoryChannelLayer cannot be rung from a thread; configure "
                        "cloudpivot.channel_layer.InProcessChannelLayer (doorbells are dropped)",
                    )
                else:
                    if own_layer is None:
                        own_layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
                    loop.run_until_complete(asyncio.wait_for(_send_all(own_layer, rings), RING_TIMEOUT_SECONDS))
            except Exception as exc:
                for kind in sorted({str(message.get("type")) for _, message in rings}):
                    self._warn(kind, f"doorbell {kind} lost ({exc!r}); listeners re-read the database")
            finally:
                self._done(count)

    def _warn(self, what: str, text: str) -> None:
        """Log a warning, at most once per WARN_EVERY_SECONDS for each kind of trouble."""
        now = time.monotonic()
        if now - self._warned_at.get(what, -WARN_EVERY_SECONDS) >= WARN_EVERY_SECONDS:
            self._warned_at[what] = now
            logger.warning("%s", text)


async def _send_all(layer: Any, rings: list[Ring]) -> None:
    await asyncio.gather(*(layer.group_send(group, message) for group, message in rings))


_sender: RingSender | None = None
_sender_lock = threading.Lock()


def sender() -> RingSender:
    """This process's sender, started on first use (and again in a forked child, which has no threads)."""
    global _sender
    current = _sender
    if current is not None and current.pid == os.getpid():
        return current
    with _sender_lock:
        if _sender is None or _sender.pid != os.getpid():
            _sender = RingSender()
        return _sender


def _forget_after_fork() -> None:
    """The parent's thread does not exist in the child, and its locks may have been held at the fork."""
    global _sender, _sender_lock
    _sender, _sender_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
