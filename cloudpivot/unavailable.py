"""While the database is away, every caller gets 503 with Retry-After, never a 500 (issue 16, item 2).

A restarted or unreachable PostgreSQL (or a locked or full SQLite file) is a passing state, not a bug: the
REST API and the Runner API answer the API's error shape (`database_unavailable`), pages a plain page that
needs no database, and both say when to try again. Runners and host agents already retry on Retry-After.

The middleware stands first in every stack (settings), so it also sees what happens after the view: when
the view failed on the database and an outer layer then failed on it too (the audit reading a lazy user),
the request still ends in 503.

Websockets have no status to answer with once the handshake has begun: `DatabaseUnavailableWebsocket`, the
outermost layer of the websocket stack (cloudpivot/asgi.py), accepts a connection whose handshake failed on
the database (the session, the user, the task read in `connect`) or on the channel layer (Redis stopped:
joining the task's group, or the layer's receive under an open socket) and closes it with 1013 "Try Again
Later", so that the page reconnects from its positions instead of the server logging a 500 rejection.
"""

from __future__ import annotations

import logging

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from cloudpivot.api import error_body
from cloudpivot.asgi_answers import JSON_PREFIXES

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
CLOSE_TRY_AGAIN_LATER = 1013  # RFC 6455 registry: "the service is experiencing overload/restart"
MESSAGE = "the database is not reachable at the moment; nothing was changed, try again shortly"
# A full disk under the database is unavailability too, but one an operator must end: its own status and words.
FULL_MESSAGE = "the server's storage is full: nothing was changed; an operator must free space, then try again"
_PG_DISK_FULL = "53100"
# PostgreSQL SQLSTATE classes of an unreachable or refusing server: 08 connection exception, 53 insufficient
# resources (too many connections, disk full), 57P01-57P05 (shut down, restarting, idle timeouts).
_PG_UNAVAILABLE = ("08", "53", "57P")
# SQLite: another writer holds the file, the file cannot be opened or written, the disk is full.
_SQLITE_UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_FULL")
_MARK = "_cloudpivot_database_unavailable"


def is_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached now (as opposed to a wrong query or a conflict)."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    sqlite_error = getattr(cause, "sqlite_errorname", None)
    if sqlite_error is not None:
        return sqlite_error.startswith(_SQLITE_UNAVAILABLE)
    sqlstate = getattr(cause, "sqlstate", None)
    # No SQLSTATE: the client side failed (connection refused or lost, the pool timed out waiting for one).
    return sqlstate is None or sqlstate.startswith(_PG_UNAVAILABLE)


def is_storage_full(exc: BaseException) -> bool:
    """Whether `exc` says the database could not write for want of disk space (SQLite's file, PostgreSQL's)."""
    cause = exc.__cause__
    sqlite_error = getattr(cause, "sqlite_errorname", None) or ""
    return sqlite_error.startswith("SQLITE_FULL") or getattr(cause, "sqlstate", None) == _PG_DISK_FULL


def unavailable_response(request: HttpRequest, *, full: bool = False) -> HttpResponse:
    """503 (database away) or 507 (its disk full), JSON for the APIs, a plain page for people."""
    status, code, message = (507, "storage_full", FULL_MESSAGE) if full else (503, "database_unavailable", MESSAGE)
    if request.path.startswith(JSON_PREFIXES):
        response: HttpResponse = JsonResponse(error_body(code, message), status=status)
    else:
        page = render_to_string("503.html", {"storage_full": full})
        response = HttpResponse(page, status=status, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class DatabaseUnavailableMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self.is_async:
            return self._acall(request)
        return self._settle(request, self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        return self._settle(request, await self.get_response(request))

    def _settle(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.status_code == 500 and hasattr(request, _MARK):
            return unavailable_response(request, full=getattr(request, _MARK))
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_unavailable(exception):
            return None
        full = is_storage_full(exception)
        setattr(request, _MARK, full)
        logger.warning(
            "database %s, answered %d: %s %s (%s)",
            "storage full" if full else "unavailable",
            507 if full else 503,
            request.method,
            request.path,
            exception,
        )
        return unavailable_response(request, full=full)


def websocket_dependency_unavailable(exc: BaseException) -> bool:
    """The database, or the channel layer's Redis, cannot be reached now."""
    import redis.exceptions

    return is_unavailable(exc) or isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError))


class DatabaseUnavailableWebsocket:
    """ASGI wrapper of the websocket stack: a database or Redis that cannot be reached closes with 1013, never
    a 500."""

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send) -> None:
        accepted = closed = False

        async def watched_send(message: dict) -> None:
            nonlocal accepted, closed
            accepted = accepted or message["type"] == "websocket.accept"
            closed = closed or message["type"] == "websocket.close"
            await send(message)

        try:
            await self.inner(scope, receive, watched_send)
        except Exception as exc:
            if not websocket_dependency_unavailable(exc):
                raise
            logger.warning("dependency unavailable, websocket closed 1013: %s (%s)", scope.get("path"), exc)
            if closed:
                return
            if not accepted:
                await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER})
