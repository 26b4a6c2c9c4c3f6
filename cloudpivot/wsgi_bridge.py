"""The bearer-token REST API under the ASGI server through Django's WSGI handler: one thread hop per request.

Django's ASGI handler hops from the event loop to the sync thread three times for a sync view (the
`request_started` signal's receivers, the view, the response's close with `request_finished`), each hop a
future, a wake-up of the other thread and a context copy; measured on this stack, a view that does nothing
cost 1.3–2.0 ms of CPU under uvicorn and 0.5 ms under gunicorn's WSGI workers (docs/decisions.md, "The
request path"). The REST API called with a bearer token has no async view, no websocket and no streamed
answer, so `WSGIBridge` reads the body on the loop (spooled to disk past FILE_UPLOAD_MAX_MEMORY_SIZE, as
Django's ASGI handler does), runs the whole request (signals, middleware, view, close) through a WSGI handler
in one hop to a thread that lives as long as the process (cloudpivot/db_threads.py: it keeps its database
connection, where Django's ASGI handler opens one per request), and sends the answer from the loop.
"""

from __future__ import annotations

import tempfile
from typing import Any

from django.conf import settings

from cloudpivot import db_threads


def wsgi_environ(scope: dict[str, Any], body: Any, length: int) -> dict[str, Any]:
    """PEP 3333 environ for an ASGI HTTP scope (what Django's ASGIRequest reads from the scope, the WSGI way)."""
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode().decode("latin-1"),
        "PATH_INFO": scope["path"].encode().decode("latin-1"),  # WSGI: the decoded path's bytes as latin-1
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] if server[1] is not None else 80),
        "SERVER_PROTOCOL": "HTTP/" + scope.get("http_version", "1.1"),
        "REMOTE_ADDR": client[0],
        "REMOTE_PORT": str(client[1]),
        "CONTENT_LENGTH": str(length),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": None,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name == "CONTENT_LENGTH":
            continue  # the body's real length, set above
        key = name if name == "CONTENT_TYPE" else "HTTP_" + name
        if key in environ:  # a repeated header: joined as the ASGI handler joins them
            value = environ[key] + ("; " if name == "COOKIE" else ",") + value
        environ[key] = value
    return environ


class WSGIBridge:
    """An ASGI application for HTTP that runs `handler` (a Django WSGI handler) in the sync thread, once."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = tempfile.SpooledTemporaryFile(max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, mode="w+b")
        try:
            length = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client went away before its body came: nothing to answer
                chunk = message.get("body", b"")
                body.write(chunk)
                length += len(chunk)
                if not message.get("more_body"):
                    break
            body.seek(0)
            # the request signals around the view close an unusable connection, as under any WSGI server
            status, headers, content = await db_threads.run(self.respond, wsgi_environ(scope, body, length))
        finally:
            body.close()
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def respond(self, environ: dict[str, Any]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The whole WSGI request in this (the sync) thread: status, headers and the body read to the end."""
        answer: dict[str, Any] = {}
        chunks: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
            answer["status"] = int(status.split(" ", 1)[0])
            answer["headers"] = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
            return chunks.append

        result = self.handler(environ, start_response)
        try:
            chunks.extend(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()  # request_finished: the database connection is given back here, in this thread
        return answer["status"], answer["headers"], b"".join(chunks)
