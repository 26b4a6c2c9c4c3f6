"""One HTTP client for the API: bearer token, the API's error shape, and retries that are safe.

A request is retried on a lost connection (and on 502/503/504) only when repeating it cannot do
anything twice: reads, and writes that carry an Idempotency-Key. Other writes are retried only
when the connection could not even be opened (nothing was sent).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import httpx

from cloudpivot_cli import __version__, exitcodes

RETRY_STATUSES = {502, 503, 504}
# Refusals that say nothing was done (a busy server, the database away, a token over its rate): any request may
# be sent again after Retry-After, a POST without an Idempotency-Key too.
NOTHING_DONE = {(503, "overloaded"), (503, "database_unavailable"), (429, "throttled"), (429, "too_many_long_polls")}


class ApiError(Exception):
    """An error answer (or none at all), with the exit status the CLI ends with."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        errors: list | None = None,
        exit_status: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.errors = errors or []
        self.exit_status = exit_status

    @property
    def exit_code(self) -> int:
        if self.exit_status is not None:
            return self.exit_status
        return exitcodes.for_status(self.status) if self.status else exitcodes.UNAVAILABLE

    def describe(self) -> str:
        """The server's sentence, then each field at fault on a line of its own."""
        lines = [f"error: {self.message}" + (f" ({self.code}, HTTP {self.status})" if self.status else "")]
        for item in self.errors:
            if isinstance(item, dict):
                field = item.get("field") or "(document)"
                lines.append(f"  field {field}: {item.get('message', '')}")
        return "\n".join(lines)


def error_from(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        return ApiError(
            str(body["message"]), status=response.status_code, code=str(body.get("code", "")), errors=body.get("errors")
        )
    reason = response.reason_phrase or "error"
    return ApiError(
        f"{response.request.method} {response.request.url.path}: HTTP {response.status_code} {reason}",
        status=response.status_code,
    )


def nothing_done(response: httpx.Response) -> bool:
    return (response.status_code, error_from(response).code) in NOTHING_DONE


def retry_after(response: httpx.Response) -> float:
    """The seconds the server's Retry-After asks for (0: none, or not in seconds), at most a minute."""
    value = response.headers.get("Retry-After", "").strip()
    return min(float(value), 60.0) if value.isdigit() else 0.0


def message_of(response: httpx.Response) -> str:
    return error_from(response).message


def body_of(response: httpx.Response) -> Any:
    """The JSON body of a success answer; something else (a proxy's HTML page) is an error, not a traceback."""
    try:
        return response.json()
    except ValueError:
        raise ApiError(
            f"{response.request.url} answered {response.status_code} without JSON: is the URL a CloudPivot server?",
            exit_status=exitcodes.ERROR,
        ) from None


class Client:
    def __init__(self, url: str, token: str, *, retry_seconds: float | None = None, timeout: float = 30):
        self.url = url.rstrip("/")
        self.retry_seconds = (
            float(os.environ.get("CLOUDPIVOT_RETRY_SECONDS", "60")) if retry_seconds is None else retry_seconds
        )
        self.http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}", "User-Agent": f"cloudpivot-cli/{__version__}"},
            timeout=timeout,
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Any = None,
        headers: dict | None = None,
        idempotent: bool | None = None,
    ) -> httpx.Response:
        """The answer to one request (2xx), retried while that is safe; ApiError otherwise."""
        safe = idempotent
        if safe is None:
            safe = method in ("GET", "HEAD") or bool(headers and headers.get("Idempotency-Key"))
        deadline = time.monotonic() + self.retry_seconds
        pause, told = 0.25, False
        while True:
            try:
                response = self.http.request(method, path, json=json, params=params, headers=headers)
            except httpx.UnsupportedProtocol as exc:
                raise ApiError(f"{self.url} is not an http:// or https:// URL: {exc}") from None
            except httpx.TransportError as exc:
                sent = not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                why = str(exc) or type(exc).__name__
                if sent and not safe:
                    raise ApiError(
                        f"the connection to {self.url} was lost after {method} {path} was sent ({why}); "
                        "it may or may not have been done: check before repeating it"
                    ) from None
                if time.monotonic() + pause > deadline:
                    raise ApiError(f"cannot reach {self.url}: {why}") from None
                if not told:
                    wait = f"retrying for up to {self.retry_seconds:g} s"
                    print(f"cloudpivot: connection to {self.url} lost ({why}); {wait}", file=sys.stderr)
                    told = True
            else:
                if response.status_code < 400:
                    return response
                retry = (safe and response.status_code in RETRY_STATUSES) or nothing_done(response)
                later = retry_after(response)
                if not (retry and time.monotonic() + max(pause, later) <= deadline):
                    raise error_from(response)
                if later and not told:
                    print(f"cloudpivot: {message_of(response)}; retrying in {later:g} s", file=sys.stderr)
                    told = True
                time.sleep(max(later - pause, 0))  # the server said when: never sooner
            time.sleep(pause)
            pause = min(pause * 2, 3.0)

    def get(self, path: str, **params: Any) -> Any:
        clean = {key: value for key, value in params.items() if value is not None and value != []}
        return body_of(self.request("GET", path, params=clean))

    def post(self, path: str, body: Any = None, *, key: str | None = None) -> Any:
        headers = {"Idempotency-Key": key} if key else None
        return body_of(self.request("POST", path, json=body, headers=headers))

    def delete(self, path: str, *, key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else None
        return self.request("DELETE", path, headers=headers)

    def pages(self, path: str, *, limit: int | None = None, **params: Any):
        """Items of a cursor-paginated list, following `next`, at most `limit` of them."""
        page_size = min(limit, 500) if limit else None
        body = self.get(path, limit=page_size, **params)
        count = 0
        while True:
            items = body.get("results", []) if isinstance(body, dict) else body
            for item in items:
                yield item
                count += 1
                if limit and count >= limit:
                    return
            following = body.get("next") if isinstance(body, dict) else None
            if not following:
                return
            body = body_of(self.request("GET", following))
