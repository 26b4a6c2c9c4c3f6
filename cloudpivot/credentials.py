"""Per-attempt Runner credentials.

A credential is derived from the server's secret, the attempt's external name and a
random nonce, so the server can hand the same credential again when a start is retried
(idempotent start) while the database holds only its SHA-256 and the nonce: a copy of
the database alone grants nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from django.conf import settings

from cloudpivot.common import sha256_hex

PREFIX = "cpr_"


def new_nonce() -> str:
    return secrets.token_hex(16)


def runner_credential(*, external_name: str, nonce: str) -> str:
    key = hashlib.sha256(f"cloudpivot-runner-credential:{settings.SECRET_KEY}".encode()).digest()
    mac = hmac.new(key, f"{external_name}:{nonce}".encode(), hashlib.sha256).digest()
    return PREFIX + base64.urlsafe_b64encode(mac).decode().rstrip("=")


def runner_credential_hash(*, external_name: str, nonce: str) -> str:
    return sha256_hex(runner_credential(external_name=external_name, nonce=nonce))


AGENT_PREFIX = "cpa_"


def agent_credential(*, name: str) -> str:
    """The host agent's credential (`cpa_…`): derived from the server's secret and the agent's name.

    Nothing is stored: the server derives it again and compares digests. It is valid only on
    /runner/v2/sync and only for attempts of the `local` connections that agent serves.
    """
    key = hashlib.sha256(f"cloudpivot-agent-credential:{settings.SECRET_KEY}".encode()).digest()
    mac = hmac.new(key, name.encode(), hashlib.sha256).digest()
    return AGENT_PREFIX + base64.urlsafe_b64encode(mac).decode().rstrip("=")


def agent_credential_matches(*, name: str, presented: str) -> bool:
    return hmac.compare_digest(sha256_hex(agent_credential(name=name)), sha256_hex(presented))
