"""Runner credentials (`cpr_…`, one per attempt). User API tokens are refused here."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from cloudpivot import credentials
from cloudpivot.common import sha256_hex
from tasks.models import Attempt


def bearer_secret(request, *, prefix: str, missing: str, wrong_kind: str) -> str:
    """The `Authorization: Bearer <secret>` value, refused unless it is of the kind this endpoint takes."""
    header = authentication.get_authorization_header(request).decode(errors="replace")
    keyword, _, value = header.partition(" ")
    value = value.strip()
    if keyword != "Bearer" or not value:
        raise exceptions.NotAuthenticated(missing)
    if not value.startswith(prefix):
        raise exceptions.AuthenticationFailed(wrong_kind)
    return value


class RunnerCredentialAuthentication(authentication.BaseAuthentication):
    """Authenticates the attempt, not a user: request.auth is the Attempt."""

    def authenticate(self, request):
        value = bearer_secret(
            request,
            prefix=credentials.PREFIX,
            missing="A runner credential is required: Authorization: Bearer cpr_…",
            wrong_kind="User API tokens are not accepted on the Runner API.",
        )
        try:
            attempt = Attempt.objects.select_related("task").get(runner_token_hash=sha256_hex(value))
        except Attempt.DoesNotExist:
            raise exceptions.AuthenticationFailed("Unknown runner credential.") from None
        return RunnerPrincipal(attempt), attempt

    def authenticate_header(self, request) -> str:
        return "Bearer"


class RunnerPrincipal:
    """Stands in for request.user: a Runner is not a person and has no user permissions."""

    is_authenticated = True
    is_active = True
    is_superuser = False
    is_staff = False

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt

    def __str__(self) -> str:
        return f"runner of {self.attempt.external_name}"


class BootstrapSecretAuthentication(authentication.BaseAuthentication):
    """Only for POST /runner/v1/bootstrap: a one-time `cpb_…` secret (runner_api/bootstrap.py).

    This checks the secret without spending it; the view spends it, so that only a POST can.
    """

    def authenticate(self, request):
        from runner_api import bootstrap

        value = bearer_secret(
            request,
            prefix=bootstrap.PREFIX,
            missing="A bootstrap secret is required: Authorization: Bearer cpb_…",
            wrong_kind="Only a bootstrap secret (cpb_…) is accepted here.",
        )
        try:
            attempt = bootstrap.bootstrap_check(secret=value)
        except bootstrap.BootstrapRefused as exc:
            raise exceptions.AuthenticationFailed(f"Bootstrap refused: {exc}.") from None
        return RunnerPrincipal(attempt), value

    def authenticate_header(self, request) -> str:
        return "Bearer"
