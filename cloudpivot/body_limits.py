"""Bodies are refused before they are read (issue 34, item 6): the outermost ASGI wrapper.

A declared Content-Length over the path's limit is answered 413 at once, before a byte of the body is read
(Django would spool it to disk first). A chunked body, whose size nobody declared, is counted as it arrives:
past the limit the application is told the client went away, and the answer is 413. The limits: the Runner
API's (RUNNER_MAX_REQUEST_BYTES: a host agent's sync carries up to 4 MiB of log bytes), a task set's
(TASK_SET_MAX_BYTES: up to 100,000 parameter objects), and DATA_UPLOAD_MAX_MEMORY_SIZE everywhere else (no
page or API takes files). The views keep their own, finer checks (runner_api/limits.py, cloudpivot/parsers.py),
which name the field.
"""

from __future__ import annotations

from django.conf import settings

from cloudpivot.asgi_answers import send_error


def limit_for(path: str) -> int:
    if path.startswith("/runner/"):
        return settings.RUNNER_MAX_REQUEST_BYTES
    if path.startswith("/api/v1/task-sets"):
        return settings.TASK_SET_MAX_BYTES
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


class BodyLimit:
    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.application(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = limit_for(path)
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                words = f"the Content-Length header is not a number: {declared[:40]!r}"
                await _refuse(send, path, 400, "invalid", words)
                return
            if length > limit:
                await _refuse(send, path, 413, "request_too_large", _words(length, limit))
            else:
                await self.application(scope, receive, send)
            return
        counted = Counted(receive, limit)
        started = False

        async def watched_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.application(scope, counted, watched_send)
        if counted.over and not started:
            await _refuse(send, path, 413, "request_too_large", _words(counted.received, limit, declared=False))


class Counted:
    """`receive`, counting body bytes; past the limit the application hears that the client went away."""

    def __init__(self, receive, limit: int) -> None:
        self.receive, self.limit = receive, limit
        self.received = 0
        self.over = False

    async def __call__(self):
        if self.over:
            return {"type": "http.disconnect"}
        message = await self.receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                self.over = True
                return {"type": "http.disconnect"}
        return message


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _words(length: int, limit: int, *, declared: bool = True) -> str:
    size = f"{length} bytes" if declared else f"over {limit} bytes (sent without a length)"
    return f"the request body is {size}; at most {limit} are accepted here"


async def _refuse(send, path: str, status: int, code: str, message: str) -> None:
    await send_error(
        send,
        path=path,
        status=status,
        code=code,
        message=message,
        errors=[{"field": "", "message": message}],
        headers=[(b"connection", b"close")],  # the body that was not read must not be taken for the next request
    )
