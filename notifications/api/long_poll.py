"""The event feed's long-poll (`GET /api/v1/events?wait=N`), held without a thread or a database connection.

The view (a DRF view, so authentication, the token's rate and the query's validation are those of every other
call) runs in one short sync section and reads the feed once. With nothing new and a `wait`, it claims one of
the caller's long-poll slots (FEED_LONG_POLLS_PER_USER per web process; over it 429 with Retry-After) and hands
back a `Hold`. The hold then waits here, on the event loop: on the feed's doorbell (rung after commit by every
writer of feed entries, cloudpivot/realtime.py) and a database look at least every RECHECK_SECONDS (a ring from
a process the doorbell does not reach, or one that was lost), each look a short sync section of its own, at most
one every LOOK_SPACING_SECONDS however often the doorbell rings. Before, each long-poll slept in one of the
process's few database threads for up to 30 s: a handful of followers stalled every token call and the host
agents' syncs (issue 34, item 1).
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from cloudpivot import db_threads, realtime
from cloudpivot.exceptions import ApplicationError
from notifications.feed import FeedFilter, entry_document, feed_page

RECHECK_SECONDS = 1.0
LOOK_SPACING_SECONDS = 0.25
STALE_SECONDS = 10.0

_lock = threading.Lock()
_held: dict[Any, list[float]] = {}  # user id → time.monotonic() deadlines of the long-polls held in this process


class TooManyLongPolls(ApplicationError):
    code = "too_many_long_polls"
    status = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def held_count(user_id: Any) -> int:
    with _lock:
        return len(_held.get(user_id, ()))


@dataclass
class Hold:
    """One long-poll's slot and what it waits for; `release()` exactly once (the view's wrapper does)."""

    user: AbstractBaseUser
    where: FeedFilter
    after: int
    limit: int
    wait: float
    deadline: float = field(init=False, default=0.0)
    next_after: int = field(init=False, default=0)

    def claim(self) -> None:
        """Take one of the user's slots, or raise TooManyLongPolls (429) when they hold them all."""
        cap = settings.FEED_LONG_POLLS_PER_USER
        now = time.monotonic()
        with _lock:
            mine = _held.setdefault(self.user.pk, [])
            # a slot whose request was cancelled between the claim and its hold is never released: gone after this
            mine[:] = [deadline for deadline in mine if deadline > now - STALE_SECONDS]
            if len(mine) >= cap:
                retry_after = max(1, math.ceil(min(mine) - now))
                raise TooManyLongPolls(
                    f"you already hold {len(mine)} long-polls of the event feed (at most {cap} at once): wait for "
                    f"one of them to answer (in {retry_after} s at the latest, the Retry-After header), or follow the "
                    "feed with a single long-poll, passing each answer's next_after as `after`",
                    retry_after=retry_after,
                )
            self.deadline = now + self.wait
            mine.append(self.deadline)

    def release(self) -> None:
        with _lock:
            mine = _held.get(self.user.pk, [])
            if self.deadline in mine:
                mine.remove(self.deadline)
            if not mine:
                _held.pop(self.user.pk, None)

    def read(self) -> dict[str, Any] | None:
        """The page when there are entries after the cursor, else None (a short sync section)."""
        rows, next_after, more = feed_page(user=self.user, where=self.where, after=self.after, limit=self.limit)
        self.next_after = next_after
        return page_document(rows, next_after, more) if rows else None

    async def page(self) -> dict[str, Any]:
        """Wait for an entry the user may see (or the end of `wait`); the page to answer, as the view's."""
        loop = asyncio.get_running_loop()
        end = loop.time() + max(0.0, self.deadline - time.monotonic())
        async with realtime.listening(realtime.FEED_DOORBELL) as channel:
            # listening from here, so the look below covers whatever came since the view's own read
            while True:
                looked = loop.time()
                page = await db_threads.run_with_connection(self.read)
                if page:
                    return page
                remaining = end - loop.time()
                if remaining <= 0:
                    return page_document([], self.next_after, False)
                channel = await realtime.ring_or_timeout(channel, min(RECHECK_SECONDS, remaining))
                await asyncio.sleep(max(0.0, min(looked + LOOK_SPACING_SECONDS, end) - loop.time()))


def page_document(rows: list, next_after: int, more: bool) -> dict[str, Any]:
    return {"events": [entry_document(row) for row in rows], "next_after": next_after, "has_more": more}


def async_view(view: Callable[..., Any]) -> Callable[..., Any]:
    """An async view around a DRF view: the view runs in one short sync section; an answer that carries a
    `hold` (see FeedView) is completed here, on the event loop, and only its looks take a thread."""

    @functools.wraps(view)  # keeps `cls`, `initkwargs` (the API schema) and `csrf_exempt`
    async def held_view(request, *args, **kwargs):
        response = await db_threads.run_with_connection(_respond, view, request, *args, **kwargs)
        hold: Hold | None = getattr(response, "hold", None)
        if hold is None:
            return response
        try:
            response.data = await hold.page()
        finally:
            hold.release()
        return await db_threads.run(_rendered, response)

    return held_view


def _respond(view: Callable[..., Any], request, *args, **kwargs):
    response = view(request, *args, **kwargs)
    return response if getattr(response, "hold", None) else _rendered(response)


def _rendered(response):
    render = getattr(response, "render", None)
    if callable(render) and not getattr(response, "is_rendered", True):
        response.render()
    return response
