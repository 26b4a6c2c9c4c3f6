"""Writes for projects, memberships and tokens."""

from __future__ import annotations

import datetime as dt
import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from cloudpivot.accounts.models import ApiToken
from cloudpivot.common import sha256_hex
from cloudpivot.exceptions import InvalidSpec


def api_token_create(
    *,
    user: AbstractBaseUser,
    name: str,
    expires_in: dt.timedelta | None = None,
    minted_with: ApiToken | None = None,
) -> tuple[ApiToken, str]:
    """Create a token and return it with its plain text, which is never stored and cannot be shown again.

    A token made with an expiring token (`minted_with`) never outlives it: asked for no expiry, it
    gets that token's; asked for a later one, it is refused. Otherwise a leaked short-lived token
    could be turned into a permanent one.
    """
    now = timezone.now()
    expires_at = now + expires_in if expires_in else None
    limit = minted_with.expires_at if minted_with else None
    if limit is not None:
        if expires_at is None:
            expires_at = limit
        elif expires_at > limit:
            message = (
                "a token made with an expiring token cannot outlive it: the token used for this request "
                f"expires at {limit.isoformat(timespec='seconds')}"
            )
            raise InvalidSpec(message, errors=[{"field": "expires_in_days", "message": message}])
    plain = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, token_hash=sha256_hex(plain), hint=plain[:10], expires_at=expires_at
    )
    return token, plain


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at", "updated_at"])
    return token
