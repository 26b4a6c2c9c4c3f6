"""allauth adapters: local signup follows CLOUDPIVOT_LOCAL_ACCOUNTS and CLOUDPIVOT_SIGNUP_OPEN; so does a first
login through a public provider (GitHub, GitLab, Gitea: anyone has an account there), while a first login
through the organisation's own OpenID Connect provider always signs up (its users are the organisation's).

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


PUBLIC_PROVIDERS = frozenset({"github", "gitlab", "gitea"})


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request, sociallogin) -> bool:
        # allauth's default asks the account adapter, which would close provider signups with local accounts.
        if sociallogin.account.provider in PUBLIC_PROVIDERS:
            return bool(getattr(settings, "CLOUDPIVOT_SIGNUP_OPEN", True))
        return True
