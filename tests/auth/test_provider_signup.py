"""A first login through a public provider (GitHub, GitLab, Gitea) signs up only where local signup is open;
through the organisation's OpenID Connect provider it always does (issue 34)."""

from __future__ import annotations

import pytest
from allauth.socialaccount.models import SocialAccount, SocialLogin
from django.test import RequestFactory

from cloudpivot.accounts.adapters import SocialAccountAdapter


@pytest.mark.parametrize(
    ("provider", "signup_open", "allowed"),
    [
        ("github", True, True),
        ("github", False, False),
        ("gitlab", False, False),
        ("gitea", False, False),
        ("openid_connect", False, True),
    ],
)
def test_public_providers_follow_the_signup_setting(settings, provider, signup_open, allowed):
    settings.CLOUDPIVOT_SIGNUP_OPEN = signup_open
    login = SocialLogin(account=SocialAccount(provider=provider, uid="1"))
    assert SocialAccountAdapter().is_open_for_signup(RequestFactory().get("/"), login) is allowed
