"""Small shared pieces: the abstract base model and token hashing (request digests: cloudpivot.idempotency)."""

from __future__ import annotations

import hashlib

from django.db import models


class BaseModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def sha256_hex(value: str | bytes) -> str:
    """Hash for high-entropy secrets (tokens): a fast hash is enough, no salt needed."""
    if isinstance(value, str):
        value = value.encode()
    return hashlib.sha256(value).hexdigest()
