"""Domain exceptions raised by services. Interfaces (API, pages, jobs) translate them."""

from __future__ import annotations


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
