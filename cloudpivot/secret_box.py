"""Encryption at rest for project secrets: Fernet tokens under the key(s) of CLOUDPIVOT_SECRETS_KEY.

The setting holds one or more Fernet keys, comma-separated: the first encrypts, every one decrypts
(MultiFernet), so a key is rotated by putting the new one first and re-encrypting (`rotate`). A copy of
the database alone reveals no secret value.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretUnreadable(Exception):
    """A stored value none of the configured keys opens (the key changed without a rotation)."""


def derived_dev_key(secret_key: str) -> str:
    """The embedded default's key: derived from the Django secret key, so it needs no configuration."""
    digest = hashlib.sha256(f"cloudpivot-project-secrets:{secret_key}".encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


def _box() -> MultiFernet:
    keys = [key.strip() for key in settings.CLOUDPIVOT_SECRETS_KEY.split(",") if key.strip()]
    return MultiFernet([Fernet(key) for key in keys])


def encrypt(value: str) -> str:
    return _box().encrypt(value.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _box().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("a stored secret cannot be decrypted with CLOUDPIVOT_SECRETS_KEY") from None


def rotate(token: str) -> str:
    """The token re-encrypted under the first key."""
    try:
        return _box().rotate(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("a stored secret cannot be decrypted with CLOUDPIVOT_SECRETS_KEY") from None


def key_problem(value: str) -> str:
    """Why a CLOUDPIVOT_SECRETS_KEY value is unusable ("" when it is fine)."""
    keys = [key.strip() for key in value.split(",") if key.strip()]
    if not keys:
        return "it is empty"
    for index, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            return f"key {index} is not a Fernet key (32 url-safe base64-encoded bytes)"
    return ""
