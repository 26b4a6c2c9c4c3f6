"""Small shared pieces: the abstract base model, token hashing and request digests."""

from __future__ import annotations

import hashlib
import json
from typing import Any

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


def canonical_sha256(document: Any) -> str:
    """Hash of the canonical JSON form, so whitespace or key order do not make two request bodies differ.

    Idempotency keys compare requests by it (tasks and resource operations)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
