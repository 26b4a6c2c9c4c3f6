"""`manage.py bootstrap_demo`: an admin, a project and the `local` connection. Idempotent."""

from __future__ import annotations

import datetime as dt
import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from cloudpivot.accounts.models import ApiToken, Membership, Project, Role
from cloudpivot.accounts.services import api_token_create, api_token_revoke
from cloudpivot.common import sha256_hex
from clusters.services import local_connection_ensure

DEMO_TOKEN_NAME = "demo (make run)"
DEMO_TOKEN_DAYS = 30


class Command(BaseCommand):
    help = "Create the demo admin, the `demo` project and the `local` cloud connection (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument(
            "--token",
            action="store_true",
            help=f"Make the demo API token (valid {DEMO_TOKEN_DAYS} days) and print it last, once: while it is "
            "valid, later runs say where it is kept instead of making another.",
        )

    @transaction.atomic
    def handle(self, *args, username: str, token: bool, **options):
        password_file = settings.VAR_DIR / f"{username}-password"
        user = get_user_model().objects.filter(username=username).first()
        created_password = ""
        if user is None:
            password = secrets.token_urlsafe(12)
            user = get_user_model().objects.create_superuser(username, f"{username}@localhost", password)
            password_file.touch(mode=0o600)
            password_file.write_text(password)
            created_password = password
        project, _ = Project.objects.get_or_create(slug="demo", defaults={"name": "Demo project"})
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": Role.ADMIN})
        local_connection_ensure(project=project)
        self.stdout.write(f"user: {username}")
        if created_password:
            self.stdout.write(f"password: {created_password}  (kept in {password_file}, readable by this user only)")
        elif password_file.exists():
            self.stdout.write(f"the password was printed when it was made; it is kept in {password_file}")
        self.stdout.write("project: demo; cloud: local")
        if token:
            self.stdout.write(_demo_token(user, settings.VAR_DIR / f"{username}-token"))


def _demo_token(user, kept) -> str:
    """The demo token's line: a new one (printed once, kept 0600 beside the password) when none is valid; else
    where the valid one is kept. Never a fresh token on every start, never one that does not expire."""
    now = timezone.now()
    valid = ApiToken.objects.filter(user=user, name=DEMO_TOKEN_NAME, revoked_at__isnull=True, expires_at__gt=now)
    if kept.exists() and valid.filter(token_hash=sha256_hex(kept.read_text().strip())).exists():
        return f"api token: the one printed when it was made, kept in {kept} (readable by this user only)"
    for old in ApiToken.objects.filter(user=user, name=DEMO_TOKEN_NAME, revoked_at__isnull=True):
        api_token_revoke(token=old)
    _, plain = api_token_create(user=user, name=DEMO_TOKEN_NAME, expires_in=dt.timedelta(days=DEMO_TOKEN_DAYS))
    kept.unlink(missing_ok=True)
    with os.fdopen(os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        file.write(plain)
    return f"api token: {plain}"
