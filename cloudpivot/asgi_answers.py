"""Error answers given at the ASGI layer, before Django, a thread or the database sees the request: the outer
wrappers' refusals (cloudpivot/body_limits.py: 400, 413; cloudpivot/shedding.py: 503).

Under /api and /runner the answer is the API's error shape (cloudpivot.api.error_body), as any view's would be;
elsewhere a short page for a person.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from cloudpivot.api import error_body

JSON_PREFIXES = ("/api/", "/runner/")


async def send_error(
    send,
    *,
    path: str,
    status: int,
    code: str,
    message: str,
    errors: list[dict[str, str]] | None = None,
    page: str | None = None,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send a whole answer: `status`, the error as JSON (or `page`, else the message on a page) and `headers`
    after the content type and length."""
    if path.startswith(JSON_PREFIXES):
        body = json.dumps(error_body(code, message, errors)).encode()
        content_type = b"application/json"
    else:
        page = page or f"<!doctype html><title>{status}</title><p>{html.escape(message)}</p>"
        body, content_type = page.encode(), b"text/html; charset=utf-8"
    start = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})
