"""Overload is shed, not queued for ever (issue 30, item 3): an ASGI wrapper that bounds the requests one web
process works on at once, and how many may wait for a place.

A request beyond WEB_MAX_IN_FLIGHT waits in a queue of at most WEB_MAX_QUEUED for WEB_QUEUE_WAIT_SECONDS; one
that finds the queue full, or waits longer, gets 503 with Retry-After at once (JSON under /api and /runner, a
short page elsewhere), answered here without Django, a thread or the database. What must never wait behind
the crowd passes untouched: the probes (/healthz, /readyz) and the long-polls, which hold no thread and have
caps of their own (the event feed's per user, the host agents' syncs on their own threads). Every client
CloudPivot ships (the Runner, the host agent, the CLI) retries after Retry-After.

Counted per web process, on its event loop (no lock needed): `manage.py serve` runs several, each with its own
bound; behind a balancer the bounds add up.
"""

from __future__ import annotations

import asyncio
from collections import deque

from django.conf import settings

from cloudpivot.asgi_answers import send_error

EXEMPT_PREFIXES = ("/healthz", "/readyz", "/runner/v2/sync", "/api/v1/events")
RETRY_AFTER_SECONDS = 2
MESSAGE = "the server is busy: try again in {seconds} s"
PAGE = (
    "<!doctype html><html><head><title>Busy</title></head><body><h1>The server is busy</h1>"
    "<p>Too many requests at once. Try again in a few seconds.</p></body></html>"
)


class LoadShedder:
    def __init__(self, application, *, max_in_flight: int, max_queued: int, queue_wait: float) -> None:
        self.application = application
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.queue_wait = queue_wait
        self.in_flight = 0
        self.waiting: deque[asyncio.Future] = deque()
        self.shed = 0  # answered 503 here since the start (for the benchmark and the logs)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path", "").startswith(EXEMPT_PREFIXES) or not self.max_in_flight:
            return await self.application(scope, receive, send)
        if not await self._enter():
            self.shed += 1
            return await _busy(scope, send)
        try:
            return await self.application(scope, receive, send)
        finally:
            self._leave()

    async def _enter(self) -> bool:
        if self.in_flight < self.max_in_flight and not self.waiting:
            self.in_flight += 1
            return True
        if len(self.waiting) >= self.max_queued:
            return False
        place = asyncio.get_running_loop().create_future()
        self.waiting.append(place)
        try:
            await asyncio.wait_for(asyncio.shield(place), self.queue_wait)
            return True  # _leave handed its slot over: in_flight already counts this request
        except TimeoutError:
            if place.done():  # handed over in the same instant: take it
                return True
            self.waiting.remove(place)
            return False
        except asyncio.CancelledError:  # the caller went away while it waited: its place (or slot) is passed on
            if place.done():
                self._leave()
            else:
                self.waiting.remove(place)
            raise

    def _leave(self) -> None:
        while self.waiting:
            place = self.waiting.popleft()
            if not place.done():
                place.set_result(None)  # the slot goes straight to the oldest waiter
                return
        self.in_flight -= 1


async def _busy(scope, send) -> None:
    await send_error(
        send,
        path=scope.get("path", ""),
        status=503,
        code="overloaded",
        message=MESSAGE.format(seconds=RETRY_AFTER_SECONDS),
        page=PAGE,
        headers=[(b"retry-after", str(RETRY_AFTER_SECONDS).encode()), (b"cache-control", b"no-store")],
    )


def with_load_shedding(application):
    return LoadShedder(
        application,
        max_in_flight=settings.WEB_MAX_IN_FLIGHT,
        max_queued=settings.WEB_MAX_QUEUED,
        queue_wait=settings.WEB_QUEUE_WAIT_SECONDS,
    )
