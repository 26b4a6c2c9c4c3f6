"""An ASGI application with no Django at all, for bench_request_floor.py: what uvicorn and the client cost alone.

It answers every HTTP request with a small JSON body; the floor below which no view served by this process
model can go. Served only by the benchmark; never part of the product.
"""

from __future__ import annotations

BODY = b'{"ok": true}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
