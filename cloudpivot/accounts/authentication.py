"""`Authorization: Bearer <token>` for users. Runner credentials are a different kind and are refused here."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import authentication, exceptions

from cloudpivot.accounts.models import ApiToken
from cloudpivot.common import sha256_hex

# Refresh last_used_at at most this often, so each request does not write.
LAST_USED_RESOLUTION_SECONDS = 60


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
        token = ApiToken.objects.select_related("user").filter(token_hash=sha256_hex(value)).order_by().first()
        if token is None or not token.is_active or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword
