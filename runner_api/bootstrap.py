"""Bootstrap secrets: a VM's user data holds a one-time secret, never the attempt credential.

The secret is derived from the attempt credential and the server's secret key, so asking for it
again (an idempotent start that adopts a server created before a crash) gives the same value the
server's user data already holds. The database keeps only its SHA-256 and when it was used.
The Runner exchanges it (POST /runner/v1/bootstrap) for its attempt credential. The secret is spent by the
credential's first use, not by the exchange: an answer lost on the way (a timeout under load, a web process
restarting, a Runner killed before it stored the credential) may be asked for again, and gets the same
credential. Once the Runner has called with its credential, or once the attempt is closed, the secret is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from cloudpivot import credentials
from cloudpivot.common import sha256_hex
from runner_api.models import BootstrapSecret
from tasks.models import Attempt

PREFIX = "cpb_"


class BootstrapRefused(Exception):
    """The secret is unknown, already used, or its attempt is closed."""


def _derive(runner_credential: str) -> str:
    key = hashlib.sha256(f"cloudpivot-bootstrap-secret:{settings.SECRET_KEY}".encode()).digest()
    mac = hmac.new(key, runner_credential.encode(), hashlib.sha256).digest()
    return PREFIX + base64.urlsafe_b64encode(mac).decode().rstrip("=")


def bootstrap_secret_issue(*, attempt_id: int, runner_credential: str) -> str:
    """The attempt's bootstrap secret (the same on every call); its hash is recorded on the first call."""
    secret = _derive(runner_credential)
    if not BootstrapSecret.objects.filter(attempt_id=attempt_id).exists():
        try:
            with transaction.atomic():
                BootstrapSecret.objects.create(attempt_id=attempt_id, secret_hash=sha256_hex(secret))
        except IntegrityError:
            pass  # a concurrent start recorded the same secret
    return secret


def bootstrap_check(*, secret: str) -> Attempt:
    """The attempt an unspent secret belongs to, without spending it."""
    if not secret.startswith(PREFIX):
        raise BootstrapRefused("not a bootstrap secret")
    record = BootstrapSecret.objects.select_related("attempt__task").filter(secret_hash=sha256_hex(secret)).first()
    if record is None:
        raise BootstrapRefused("unknown bootstrap secret")
    _refuse_if_spent(record)
    return record.attempt


def _refuse_if_spent(record: BootstrapSecret) -> None:
    if record.used_at is not None and record.attempt.runner_contact_at is not None:
        raise BootstrapRefused(
            "this bootstrap secret was already used, and the credential it gave has called since; it works once"
        )


def bootstrap_exchange(*, secret: str, peer: str = "") -> Attempt:
    """Spend the secret once; return its attempt (the caller answers the attempt credential)."""
    if not secret.startswith(PREFIX):
        raise BootstrapRefused("not a bootstrap secret")
    with transaction.atomic():
        record = (
            BootstrapSecret.objects.select_for_update()
            .select_related("attempt__task")
            .filter(secret_hash=sha256_hex(secret))
            .first()
        )
        if record is None:
            raise BootstrapRefused("unknown bootstrap secret")
        _refuse_if_spent(record)
        attempt = record.attempt
        if attempt.is_closed or attempt.number != attempt.task.attempts_count:
            raise BootstrapRefused(f"attempt {attempt.external_name} is closed")
        if record.used_at is None:  # the first exchange is the one recorded; one asked again changes nothing
            record.used_at, record.used_from = timezone.now(), peer[:64]
            record.save(update_fields=["used_at", "used_from", "updated_at"])
    return attempt


def attempt_credential(attempt: Attempt) -> str:
    return credentials.runner_credential(external_name=attempt.external_name, nonce=attempt.credential_nonce)
