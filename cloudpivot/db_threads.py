"""Threads that live as long as the web process, for the database work of its requests.

Django's ASGI handler runs a request's sync code in a thread made for that request (asgiref's
ThreadSensitiveContext), so each request opens a database connection of its own and closes it at the end:
on SQLite that parses the whole schema, ~1.7 ms of CPU per request (docs/decisions.md, "Threads that keep
their connection"). The token API (cloudpivot/wsgi_bridge.py) and the host agents' sync
(runner_api/sync_view.py) run here instead, as gunicorn's gthread workers would: a few threads, each keeping
its connection from request to request (SQLite: CONN_MAX_AGE=None; PostgreSQL: the pool hands it back).
Several threads, not one, so that a request waiting for SQLite's write lock holds up no read.
The host agents' syncs have threads of their own (`agent_run`, CLOUDPIVOT_AGENT_DB_THREADS): however many token
requests queue for the first ones, an agent's sync never waits behind them (issue 34, item 1).
DB_THREADS = 0 runs the work as Django would (`sync_to_async`, thread-sensitive): the test process sets it,
since the test client calls an async view from the test's own thread, whose transaction the view must see.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings

T = TypeVar("T")
USERS = "DB_THREADS"  # the token API, the feed's reads
AGENTS = "AGENT_DB_THREADS"  # the host agents' syncs only
_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def threads(pool: str = USERS) -> ThreadPoolExecutor:
    """The threads of `pool` (the name of the setting that sizes it), made on first use."""
    with _pools_lock:
        if pool not in _pools:
            prefix = "db-agents" if pool == AGENTS else "db"
            _pools[pool] = ThreadPoolExecutor(max_workers=max(1, getattr(settings, pool)), thread_name_prefix=prefix)
        return _pools[pool]


async def run(function: Callable[..., T], *args, **kwargs) -> T:
    """`function(*args, **kwargs)` in one of the threads, with the caller's context variables (asgiref's
    `sync_to_async` on our executor: an `async_to_sync` inside goes back to the caller's loop)."""
    if settings.DB_THREADS <= 0:
        return await sync_to_async(function, thread_sensitive=True)(*args, **kwargs)
    return await sync_to_async(function, thread_sensitive=False, executor=threads())(*args, **kwargs)


async def run_with_connection(function: Callable[..., T], *args, **kwargs) -> T:
    """As `run`, for code outside Django's request cycle: an unusable or expired connection is dropped first
    and after, as the request signals do for a view (channels' `database_sync_to_async` on our executor)."""
    return await _run_with_connection(USERS, function, *args, **kwargs)


async def agent_run(function: Callable[..., T], *args, **kwargs) -> T:
    """As `run_with_connection`, on the agents' own threads: what users queue cannot delay an agent's sync."""
    return await _run_with_connection(AGENTS, function, *args, **kwargs)


async def _run_with_connection(pool: str, function: Callable[..., T], *args, **kwargs) -> T:
    if settings.DB_THREADS <= 0:  # in the request's own thread, whose cycle does this already
        return await run(function, *args, **kwargs)
    executor = threads(pool)
    return await database_sync_to_async(function, thread_sensitive=False, executor=executor)(*args, **kwargs)
