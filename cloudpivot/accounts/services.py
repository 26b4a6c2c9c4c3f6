"""Writes for projects, memberships and tokens."""

from __future__ import annotations

import datetime as dt
import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from cloudpivot.accounts.models import ApiToken
from cloudpivot.common import sha256_hex


def api_token_create(
    *, user: AbstractBaseUser, name: str, expires_in: dt.timedelta | None = None
) -> tuple[ApiToken, str]:
    """Create a token and return it with its plain text, which is never stored and cannot be shown again."""
    plain = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        token_hash=sha256_hex(plain),
        hint=plain[:10],
        expires_at=timezone.now() + expires_in if expires_in else None,
    )
    return token, plain


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at", "updated_at"])
    return token
