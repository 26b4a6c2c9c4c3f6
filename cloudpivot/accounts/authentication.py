"""`Authorization: Bearer <token>` for users. Runner credentials are a different kind and are refused here."""

from __future__ import annotations

import copy
import threading
import time

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions

from cloudpivot.accounts.models import ApiToken
from cloudpivot.common import sha256_hex

# Refresh last_used_at at most this often, so each request does not write.
LAST_USED_RESOLUTION_SECONDS = 60

# A token found in the database is trusted for this long by this process without asking again (the
# query was a fifth of a task read's CPU). It bounds how late a revocation, an expiry or a deactivated
# user takes effect in *another* process; in this one a save or delete of a token or a user empties
# the cache at once (token_cache_clear). 0 turns the cache off.
CACHE_SECONDS_DEFAULT = 1.0

_recent: dict[str, tuple[float, ApiToken]] = {}
_recent_lock = threading.Lock()


def token_cache_clear(**kwargs) -> None:
    """Forget every cached token (a post_save/post_delete receiver for ApiToken and the user model)."""
    with _recent_lock:
        _recent.clear()


def _token_for(token_hash: str) -> ApiToken | None:
    ttl = getattr(settings, "API_TOKEN_CACHE_SECONDS", CACHE_SECONDS_DEFAULT)
    now = time.monotonic()
    cached = _recent.get(token_hash)
    if cached is not None and now - cached[0] < ttl:
        token = copy.copy(cached[1])  # each request its own objects: views may set attributes on request.user
        token.user = copy.copy(cached[1].user)
        return token
    token = ApiToken.objects.select_related("user").filter(token_hash=token_hash).order_by().first()
    if token is not None and ttl > 0:
        with _recent_lock:
            if len(_recent) > 10_000:  # bounded: many tokens in a second is not what it is for
                _recent.clear()
            _recent[token_hash] = (now, copy.copy(token))
    return token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        keyword, _, value = header.partition(" ")
        if keyword != self.keyword:
            return None
        value = value.strip()
        if not value:
            raise exceptions.AuthenticationFailed("Empty bearer token.")
        if not value.startswith(ApiToken.PREFIX):
            raise exceptions.AuthenticationFailed(
                "This is not a CloudPivot API token (runner credentials are not accepted here)."
            )
        token = _token_for(sha256_hex(value))
        if token is None or not token.is_active or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token_cache_clear()  # the cached copy's last_used_at is stale now
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword
