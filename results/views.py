"""The download of one stored output through its signed link (results/links.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import IO

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET

from cloudpivot.api import error_body
from results.links import LinkRefused, link_resolve
from results.stores import store_of

CHUNK = 1024 * 1024


@require_GET
def output_download(request: HttpRequest, token: str, name: str) -> HttpResponse:
    """The file's bytes (the directory store: served from this host). The link is the permission."""
    try:
        file = link_resolve(token, name)
        manifest = file.attempt.output_manifest
        handle = store_of(file.attempt, manifest.store).open(file.attempt.external_name, file.ref)
    except LinkRefused as exc:
        code = "link_expired" if "expired" in str(exc) else "forbidden" if exc.status == 403 else "not_found"
        return JsonResponse(error_body(code, str(exc)), status=exc.status)
    except (OSError, LookupError):
        message = "this output is no longer in its store (retention may have removed it)"
        return JsonResponse(error_body("not_found", message), status=404)
    # Under ASGI an async iterator, read in a thread a chunk at a time: a sync one would be read whole into
    # memory first (Django's StreamingHttpResponse), and outputs may be gigabytes.
    content = _chunks_async(handle) if isinstance(request, ASGIRequest) else _chunks(handle)
    response = StreamingHttpResponse(content, content_type="application/octet-stream")
    response["Content-Length"] = str(os.fstat(handle.fileno()).st_size)
    response["Content-Disposition"] = content_disposition_header(True, name.rsplit("/", 1)[-1])
    response["X-Checksum-SHA256"] = file.sha256
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


def _chunks(handle: IO[bytes]) -> Iterator[bytes]:
    with handle:
        while chunk := handle.read(CHUNK):
            yield chunk


async def _chunks_async(handle: IO[bytes]) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
    finally:
        handle.close()
