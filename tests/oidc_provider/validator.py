"""Claims of the test provider: the standard profile ones plus `groups`, from the user's Django groups."""

from __future__ import annotations

from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsClaimValidator(OAuth2Validator):
    # Claims not listed here are filtered out of the ID token and userinfo; groups come with "profile".
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "profile"}

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": user.username,
            "name": user.get_full_name() or user.username,
            "email": user.email,
            "email_verified": True,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }
