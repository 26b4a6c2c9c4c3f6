"""The API's single error shape: {"code", "message", "errors": [{"field", "message"}]}."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from cloudpivot.exceptions import ApplicationError, InvalidSpec

IDEMPOTENCY_KEY_MAX = 200  # the models' idempotency_key column


def flatten_errors(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """Turn DRF's nested error detail into a flat list with dotted field paths (`command.0`)."""
    if isinstance(detail, dict):
        out: list[dict[str, str]] = []
        for key, value in detail.items():
            field = str(key) if key != "non_field_errors" else ""
            out += flatten_errors(value, f"{prefix}.{field}" if prefix and field else prefix or field)
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [{"field": prefix, "message": str(item)} for item in detail]
        out = []
        for index, item in enumerate(detail):
            if item:
                out += flatten_errors(item, f"{prefix}.{index}" if prefix else str(index))
        return out
    return [{"field": prefix, "message": str(detail)}]


def idempotency_key(request: Request) -> str:
    """The request's Idempotency-Key header ("" without one); see cloudpivot.idempotency for what it does."""
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > IDEMPOTENCY_KEY_MAX:
        raise InvalidSpec(
            "Idempotency-Key is too long",
            errors=[{"field": "Idempotency-Key", "message": f"at most {IDEMPOTENCY_KEY_MAX} characters"}],
        )
    return key


def error_body(code: str, message: str, errors: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "errors": errors or []}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        retry_after = getattr(exc, "retry_after", None)  # a 429 or a 503 says when to come back
        headers = {"Retry-After": str(retry_after)} if retry_after else None
        return Response(error_body(exc.code, exc.message, exc.errors) | exc.extra, status=exc.status, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"the request body is too large: at most {limit} bytes are accepted"
        return Response(
            error_body("request_too_large", message, [{"field": "", "message": message}]),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):  # DRF's get_object_or_404 (tokens, quotas): the same shape as ours
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, drf_exceptions.ValidationError):
        errors = flatten_errors(exc.detail)
        first = errors[0] if errors else {"field": "", "message": "invalid input"}
        message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
        response.data = error_body("invalid", message, errors)
    elif isinstance(exc, drf_exceptions.Throttled) and exc.get_codes() == "throttled":  # the per-token rate
        message = (
            f"too many requests with this token (at most {settings.API_TOKEN_RATE}): try again in {exc.wait or 1} s "
            "(the Retry-After header), and space your calls out; follow changes with the event feed's long-poll "
            "(GET /api/v1/events?wait=N) instead of polling"
        )
        response.data = error_body("throttled", message)
    elif isinstance(exc, drf_exceptions.ParseError):
        response.data = error_body("parse_error", str(exc.detail), [{"field": "", "message": str(exc.detail)}])
    elif isinstance(exc, drf_exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        response.data = error_body(str(code), str(exc.detail))
    return response
