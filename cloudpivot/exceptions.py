"""Domain exceptions raised by services (interfaces translate them: cloudpivot.api for the API), and the
cloud errors backends raise with the one table that turns them into API errors."""

from __future__ import annotations

from typing import Literal


class ApplicationError(Exception):
    """Base of all domain errors: a machine code, a message for people, and optional field errors."""

    code = "error"
    status = 400

    def __init__(
        self,
        message: str,
        *,
        errors: list[dict[str, str]] | None = None,
        code: str | None = None,
        extra: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or []
        self.extra = extra or {}
        if code:
            self.code = code


class RequestTooLarge(ApplicationError):
    """A body over the API's size limit: refused by its length, before it is parsed."""

    code = "request_too_large"
    status = 413


class InvalidSpec(ApplicationError):
    """The submitted document cannot be run; `errors` names each field at fault."""

    code = "invalid"
    status = 400


class NotFound(ApplicationError):
    """Missing, or not visible to this user (the same answer, so ids cannot be probed)."""

    code = "not_found"
    status = 404


class PermissionDenied(ApplicationError):
    """Visible, but this user's role does not allow the action."""

    code = "permission_denied"
    status = 403


class Conflict(ApplicationError):
    """The request contradicts the current state (a finished task cancelled, a reused idempotency key)."""

    code = "conflict"
    status = 409


class InvalidTransition(Conflict):
    """The state machine does not allow this move."""

    code = "invalid_transition"


class InvalidState(Conflict):
    """The object's observed status does not allow the action now (an instance that is not stopped, started)."""

    code = "invalid_state"


class QuotaExceeded(ApplicationError):
    """The request can never fit the limits (asking more than the whole quota), or the cloud's own quota said no."""

    code = "quota_exceeded"
    status = 422


class UnsupportedAction(ApplicationError):
    """The cloud cannot do this at all (e.g. purge volumes where there is no block storage)."""

    code = "unsupported"
    status = 422


class CloudUnavailable(ApplicationError):
    """The cloud could not be asked (unreachable, busy): try again later."""

    code = "cloud_unavailable"
    status = 503


class CloudRefused(ApplicationError):
    """The cloud answered no to the connection itself (credentials, permissions): an admin's matter."""

    code = "cloud_refused"
    status = 502


# ---------------------------------------------------------------------------- cloud errors
ErrorKind = Literal["auth", "quota", "not_found", "invalid_spec", "transient"]


class BackendError(Exception):
    """A cloud said no, in words. Backends raise only this (their SDK's exceptions never leave them);
    only `transient` errors are worth retrying. `cloud_error` is how an API answers one."""

    def __init__(self, message: str, *, kind: ErrorKind = "transient") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind

    @property
    def permanent(self) -> bool:
        return self.kind != "transient"


def cloud_error(exc: BackendError, *, doing: str, field: str | None = None) -> ApplicationError:
    """The API error for a cloud's answer during a request, one table for every API:

    - `transient` → 503 cloud_unavailable (try again later);
    - `not_found`, `invalid_spec` → 400 on `field` when the request named the thing (a flavor, an image),
      else 404 not_found;
    - `quota` → 422 quota_exceeded (the cloud's own quota);
    - `auth` → 502 cloud_refused (the connection's credentials or permissions).

    `doing` says what was asked ("reading the flavor", "kube-a: nodes"); the cloud's words follow it.
    """
    message = f"{doing}: {exc.message}"
    if exc.kind in ("not_found", "invalid_spec"):
        if field is not None:
            return InvalidSpec(exc.message, errors=[{"field": field, "message": exc.message}])
        return NotFound(message)
    if exc.kind == "transient":
        return CloudUnavailable(message)
    if exc.kind == "quota":
        return QuotaExceeded(message)
    return CloudRefused(message)
