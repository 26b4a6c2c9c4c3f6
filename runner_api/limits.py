"""The Runner API's request size limit, checked before a byte of the body is decoded.

Runners and host agents are machines that may be broken or hostile: a body is refused by its declared
length (413), so a huge one is never parsed into memory. A body-carrying request without a length is
refused too (411): its size could only be learned by reading it. One helper for both protocol
versions (runner_api/views.py for v1, runner_api/sync_view.py for v2).

The default fits the largest honest request: a host agent's sync carries at most 4 MiB of log bytes
(base64: about 5.4 MiB) plus events; a v1 log post at most 1 MiB (base64: about 1.4 MiB).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from cloudpivot.api import error_body

BODYLESS_METHODS = {"GET", "HEAD", "OPTIONS", "DELETE"}


def max_request_bytes() -> int:
    """`RUNNER_MAX_REQUEST_BYTES` (env `CLOUDPIVOT_RUNNER_MAX_REQUEST_BYTES`), 8 MiB by default."""
    return int(settings.RUNNER_MAX_REQUEST_BYTES)


def request_size_refusal(request: HttpRequest) -> JsonResponse | None:
    """The 413 (or 411) answer for a body that is too large (or of unknown size); None when it may be read."""
    declared = request.META.get("CONTENT_LENGTH") or ""
    if not declared.strip():
        if request.method in BODYLESS_METHODS:
            return None
        return _refusal(411, "length_required", "a Content-Length header is required on the Runner API")
    try:
        length = int(declared)
    except ValueError:
        return _refusal(400, "invalid", f"the Content-Length header is not a number: {declared[:40]!r}")
    limit = max_request_bytes()
    if length > limit:
        return _refusal(413, "request_too_large", f"the request body is {length} bytes; at most {limit} are accepted")
    return None


def _refusal(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(code, message, [{"field": "", "message": message}]), status=status)
