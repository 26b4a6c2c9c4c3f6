"""Password checks that honour CLOUDPIVOT_LOCAL_ACCOUNTS, read on every attempt (so tests can switch it).

With local accounts off, nobody logs in with a password through allauth's pages, and only a
superuser can through the admin's login page (/admin/login/): the way in when the provider is down.
Provider logins do not authenticate through backends; allauth only records AccountBackend on the session.
"""

from __future__ import annotations

from allauth.account.auth_backends import AuthenticationBackend
from django.conf import settings
from django.contrib.auth.backends import ModelBackend


def local_accounts_enabled() -> bool:
    return bool(getattr(settings, "CLOUDPIVOT_LOCAL_ACCOUNTS", True))


class LocalPasswordBackend(ModelBackend):
    """Django's username/password check (the admin's login page); superusers only when local accounts are off."""

    def user_can_authenticate(self, user) -> bool:
        return super().user_can_authenticate(user) and (local_accounts_enabled() or user.is_superuser)


class AccountBackend(AuthenticationBackend):
    """allauth's username-or-email/password check; refuses every password when local accounts are off."""

    def authenticate(self, request, **credentials):
        if not local_accounts_enabled():
            return None
        return super().authenticate(request, **credentials)
