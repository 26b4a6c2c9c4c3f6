"""Websocket streams: one task's events, state and log (`/ws/tasks/<id>/`), and the dashboard.

The database is the record and the channel layer only a doorbell (cloudpivot/realtime.py).
Each consumer follows the database from the position the client names in its query
string, sends everything after it, and then keeps going: it re-reads when a doorbell
rings and, because a doorbell can be lost (at-most-once delivery; the embedded default's
in-process channel layer does not reach across processes at all), also every
`poll_seconds`. Every message carries its seq or byte position, so a client drops what it
already has and a reconnect from its last position misses nothing.

Close codes: 4401 not logged in, 4404 no such task (also for another project's task).
Both are sent after accepting, so a browser sees the code and stops reconnecting.
See docs/portal.md for the protocol.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cloudpivot import log_hub
from cloudpivot.accounts.selectors import projects_visible_to
from cloudpivot.exceptions import NotFound
from cloudpivot.realtime import project_group, task_group
from tasks import portal
from tasks.models import Task
from tasks.selectors import task_get_for_user, tasks_visible_to
from tasks.services.logs import log_attempt, log_read

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


def _query_int(scope: dict[str, Any], name: str) -> int:
    values = parse_qs(scope.get("query_string", b"").decode("latin1")).get(name) or ["0"]
    try:
        return max(0, int(values[0]))
    except ValueError:
        return 0


class FollowingConsumer(AsyncJsonWebsocketConsumer):
    """Shared loop: wake on a doorbell or every poll_seconds, read the database, send what is new."""

    poll_seconds = 1.0
    # A burst of doorbells costs one read per gap, not one read per ring.
    min_gap_seconds = 0.05
    follower: asyncio.Task | None = None
    groups_joined: list[str]

    async def refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def follow(self, groups: list[str]) -> None:
        """Join the groups, accept, and start following (the first read happens at once)."""
        self.groups_joined = []
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.append(group)
        await self.accept()
        if getattr(self, "wake", None) is None:  # (a subclass may have made it already, to be rung before this)
            self.wake = asyncio.Event()
        self.wake.set()
        self.follower = asyncio.create_task(self._follow())

    async def disconnect(self, code: int) -> None:
        if self.follower is not None:
            self.follower.cancel()
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def _follow(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=self.poll_seconds)
            except TimeoutError:
                pass
            self.wake.clear()
            try:
                messages = await database_sync_to_async(self.next_read())()
            except Exception:
                logger.warning("websocket read failed; trying again", exc_info=True)
                await asyncio.sleep(self.poll_seconds)
                continue
            if messages is None:
                await self.close(code=CLOSE_NOT_FOUND)
                return
            for message in messages:
                await self.send_json(message)
            await asyncio.sleep(self.min_gap_seconds)

    def next_read(self) -> Callable[[], list[dict[str, Any]] | None]:
        """The read to make now: `read_new` unless a subclass knows a smaller one is enough."""
        return self.read_new

    def read_new(self) -> list[dict[str, Any]] | None:
        """Everything new since the last read (runs in a thread); None ends the stream."""
        raise NotImplementedError


class TaskConsumer(FollowingConsumer):
    """`/ws/tasks/<id>/?after_seq=N&log_attempt=A&log_position=M`: events, state and log of one task.

    Messages:
      {"type": "event", "seq", "event", "message", "data", "time"}            every TaskEvent after after_seq
      {"type": "state", "seq", "state", "label", "badge", "reason", "terminal"} when the state (or reason) differs
      {"type": "log", "attempt", "position", "next_position", "data"}        log text [position, next_position)
    A ring of the log doorbell alone (a running program's output: many a second) reads the log alone; the
    task, its visibility to the user and its events are read on the poll (at most `poll_seconds` apart) and
    on an event's ring. So a user removed from the project stops seeing the log within `poll_seconds`.
    Log positions count bytes across both streams of one attempt. When a newer attempt
    exists than the client's, its log starts from 0. A backlog over portal.LOG_TAIL_BYTES
    is skipped to its last LOG_TAIL_BYTES (the message's position then lies beyond the
    client's): the page offers the skipped part on demand.
    """

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return
        task_id = self.scope["url_route"]["kwargs"]["task_id"]
        self.task = await database_sync_to_async(self._visible_task)(user, task_id)
        if self.task is None:
            await self.refuse(CLOSE_NOT_FOUND)
            return
        self.user = user
        self.seq = _query_int(self.scope, "after_seq")
        self.attempt = _query_int(self.scope, "log_attempt")
        self.position = _query_int(self.scope, "log_position")
        self.sent_state: tuple[str, str] | None = None
        self.wake = asyncio.Event()
        self.listening = True
        await log_hub.listen(self.task.pk, self.log_rung)  # before the first read: no ring after it is missed
        await self.follow([task_group(self.task.pk)])

    @staticmethod
    def _visible_task(user: Any, task_id: Any) -> Task | None:
        try:
            return task_get_for_user(user=user, task_id=task_id)
        except NotFound:
            return None

    # Doorbells (cloudpivot/realtime.py): only a hint to read now.
    async def task_changed(self, message: dict[str, Any]) -> None:
        if message.get("seq", 0) > self.seq:
            self.events_rung = True
            self.wake.set()

    def log_rung(self, position: int) -> None:
        """The log doorbell (cloudpivot/log_hub.py): new bytes up to `position`."""
        if position != self.position:
            self.wake.set()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "listening", False):
            await log_hub.unlisten(self.task.pk, self.log_rung)
        await super().disconnect(code)

    # When the task, its visibility and its events were last read (time.monotonic()), and whether an event's
    # doorbell rang since: both decide between a whole read and a read of the log alone (next_read).
    checked_at = -math.inf
    events_rung = True

    def next_read(self) -> Callable[[], list[dict[str, Any]] | None]:
        if not self.events_rung and time.monotonic() - self.checked_at < self.poll_seconds:
            return self.read_log_new
        return self.read_new

    def read_new(self) -> list[dict[str, Any]] | None:
        """The positions move as the read goes; a read that fails half-way (the database went away between
        its queries) puts them back, so the next one sends again what this one never sent: no gap."""
        before = (self.seq, self.attempt, self.position, self.sent_state, self.checked_at)
        self.events_rung, self.checked_at = False, time.monotonic()  # a ring from now on asks for another
        try:
            return self._read_new()
        except Exception:
            self.seq, self.attempt, self.position, self.sent_state, self.checked_at = before
            self.events_rung = True
            raise

    def read_log_new(self) -> list[dict[str, Any]]:
        """The log bytes new since the last read, alone (a log doorbell's ring between two whole reads)."""
        before = (self.attempt, self.position)
        try:
            return self._read_log()
        except Exception:
            self.attempt, self.position = before
            raise

    def _read_new(self) -> list[dict[str, Any]] | None:
        row = (
            tasks_visible_to(user=self.user)
            .filter(pk=self.task.pk)
            .values("state", "state_reason", "last_event_seq")
            .first()
        )
        if row is None:  # deleted, or the user left the project
            return None
        out: list[dict[str, Any]] = []
        while row["last_event_seq"] > self.seq:
            events = portal.events_after(task_id=self.task.pk, after_seq=self.seq, limit=200)
            if not events:
                break
            out += events
            self.seq = events[-1]["seq"]
        if out:  # read again after the events, so the state sent is at least as new as the history sent
            row = Task.objects.filter(pk=self.task.pk).values("state", "state_reason", "last_event_seq").first() or row
        if (row["state"], row["state_reason"]) != self.sent_state:
            self.sent_state = (row["state"], row["state_reason"])
            out.append({"type": "state", "seq": row["last_event_seq"], **portal.task_state_payload(row)})
        out += self._read_log()
        return out

    def _read_log(self) -> list[dict[str, Any]]:
        attempt = log_attempt(task_id=self.task.pk)
        if attempt is None:
            return []
        if attempt.number != self.attempt:
            self.attempt, self.position = attempt.number, 0
        total = attempt.log_bytes
        if self.position > total:  # a position this attempt never had: start over from its tail
            self.position = max(0, total - portal.LOG_TAIL_BYTES)
        elif total - self.position > portal.LOG_TAIL_BYTES:
            self.position = total - portal.LOG_TAIL_BYTES
        out = []
        while self.position < total:
            piece = log_read(task=self.task, attempt=attempt, offset=self.position, limit=portal.LOG_MESSAGE_BYTES)
            if piece["next_offset"] <= self.position:
                break
            out.append(
                {
                    "type": "log",
                    "attempt": attempt.number,
                    "position": self.position,
                    "next_position": piece["next_offset"],
                    "data": piece["data"],
                }
            )
            self.position = piece["next_offset"]
        return out


class DashboardConsumer(FollowingConsumer):
    """`/ws/dashboard/?since=<ISO time>`: state changes of tasks in the user's projects.

    Message: {"type": "task", "task_id", "seq", "state", "label", "badge", "reason", "terminal",
    "name", "short_id", "owner", "project", "cloud", "url", "since"}. `seq` is the task's
    last event seq (drop a message whose seq is not above the one shown); `since` is the
    cursor to reconnect with.
    """

    # Re-read this far back each time: a change committed late (a slow transaction) is still seen.
    overlap = dt.timedelta(seconds=5)
    batch = 500

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        since = parse_qs(self.scope.get("query_string", b"").decode("latin1")).get("since") or [""]
        self.since = dashboard_since(since[0])
        self.sent: dict[str, int] = {}
        self.rung: set[str] = set()
        projects = await database_sync_to_async(self._project_ids)()
        await self.follow([project_group(pk) for pk in projects])

    def _project_ids(self) -> list[int]:
        return list(projects_visible_to(user=self.user).values_list("pk", flat=True))

    async def task_changed(self, message: dict[str, Any]) -> None:
        task_id = message.get("task_id", "")
        if message.get("seq", 0) > self.sent.get(task_id, 0):
            self.rung.add(task_id)
            self.wake.set()

    def read_new(self) -> list[dict[str, Any]]:
        now = timezone.now()
        rung, self.rung = self.rung, set()
        changed = Q(updated_at__gte=self.since - self.overlap)
        if rung:
            changed |= Q(pk__in=rung)
        rows = list(
            tasks_visible_to(user=self.user)
            .filter(changed)
            .order_by("updated_at")
            .values(
                "id",
                "name",
                "state",
                "state_reason",
                "last_event_seq",
                "updated_at",
                "owner__username",
                "project__slug",
                "connection__cloud_id",
            )[: self.batch]
        )
        self.since = rows[-1]["updated_at"] if len(rows) == self.batch else now
        out = []
        for row in rows:
            task_id = str(row["id"])
            if row["last_event_seq"] <= self.sent.get(task_id, 0):
                continue
            self.sent[task_id] = row["last_event_seq"]
            out.append(
                {
                    "type": "task",
                    "task_id": task_id,
                    "seq": row["last_event_seq"],
                    **portal.task_state_payload(row),
                    "name": row["name"],
                    "short_id": row["id"].hex[:8],
                    "owner": row["owner__username"],
                    "project": row["project__slug"],
                    "cloud": row["connection__cloud_id"],
                    "url": reverse("tasks:task_detail", kwargs={"task_id": row["id"]}),
                    "since": self.since.isoformat(),
                }
            )
        return out


SINCE_AT_MOST = dt.timedelta(days=1)


def dashboard_since(raw: str) -> dt.datetime:
    """The page's `since`, within limits: not a date, not zoned or not a real one (2026-13-45) is now; one in
    the future is now; one older than a day is a day ago (the page reloads to catch up further)."""
    now = timezone.now()
    try:
        parsed = parse_datetime(raw[:64].replace(" ", "+")) if raw else None
    except ValueError:
        parsed = None
    if parsed is None or not timezone.is_aware(parsed):
        return now
    return min(max(parsed, now - SINCE_AT_MOST), now)
