"""`manage.py apitoken create USERNAME`: a new API token, printed once as the last line."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from cloudpivot.accounts.models import ApiToken
from cloudpivot.accounts.services import api_token_create, api_token_revoke


class Command(BaseCommand):
    help = "Create, list or revoke API tokens."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a token; it is printed once, as the last line.")
        create.add_argument("username")
        create.add_argument("--name", default="cli")
        create.add_argument("--expires-days", type=int, default=None)
        listing = sub.add_parser("list", help="List a user's tokens (never their values).")
        listing.add_argument("username")
        revoke = sub.add_parser("revoke", help="Revoke a token by its hint (the first characters).")
        revoke.add_argument("username")
        revoke.add_argument("hint")

    def handle(self, *args, action: str, username: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if action == "create":
            expires = dt.timedelta(days=options["expires_days"]) if options["expires_days"] else None
            token, plain = api_token_create(user=user, name=options["name"], expires_in=expires)
            self.stderr.write(f"Token {token.name!r} for {username} (shown once, store it now):")
            self.stdout.write(plain)
        elif action == "list":
            for token in ApiToken.objects.filter(user=user):
                state = "active" if token.is_active else "revoked/expired"
                self.stdout.write(f"{token.hint}…  {token.name}  {state}  last used {token.last_used_at or 'never'}")
        else:
            tokens = ApiToken.objects.filter(user=user, hint__startswith=options["hint"][:10])
            if not tokens:
                raise CommandError("no such token")
            for token in tokens:
                api_token_revoke(token=token)
                self.stdout.write(f"revoked {token}")
