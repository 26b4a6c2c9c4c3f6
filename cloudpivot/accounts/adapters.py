"""allauth adapters: local signup follows CLOUDPIVOT_LOCAL_ACCOUNTS; a provider's first login always signs up.

A new user joins no project here: an admin adds them, or the OIDC group map does at login
(cloudpivot/accounts/group_sync.py).
"""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django.conf import settings

from cloudpivot.accounts.backends import local_accounts_enabled


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request) -> bool:
        return local_accounts_enabled() and bool(getattr(settings, "CLOUDPIVOT_SIGNUP_OPEN", True))

    def send_password_reset_mail(self, user, email, context) -> None:
        # With local accounts off a password is of no use on the login page; the reset form still answers
        # as usual (it never tells whether an address is known), but no mail leaves.
        if local_accounts_enabled():
            super().send_password_reset_mail(user, email, context)


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request, sociallogin) -> bool:
        # allauth's default asks the account adapter, which would close provider signups with local accounts.
        return True
