"""The Idempotency-Key of writes (task submission, instance operations): the request's digest, and the
row an earlier request with the same key made.

Each model keeps the key per user (unique where set) and the digest of the request that used it; a
second request with the key is the first one's replay, or a Conflict when its body differs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from cloudpivot.exceptions import Conflict

M = TypeVar("M", bound=Model)


def canonical_sha256(document: Any) -> str:
    """Hash of the canonical JSON form, so whitespace or key order do not make two request bodies differ."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def replay_for_key(rows: QuerySet[M], *, key: str, digest: str, digest_field: str, what: str, new: str) -> M | None:
    """The row among `rows` (the user's own) that an earlier request with this key made; None without one.

    Conflict when that request's digest differs: the key was reused for another `what` (words for the
    message: "task document", "request"); a new `new` ("task", "action") needs a new key.
    """
    if not key:
        return None
    row = rows.filter(idempotency_key=key).first()
    if row is not None and getattr(row, digest_field) != digest:
        raise Conflict(
            f"this Idempotency-Key was already used with a different {what}; use a new key for a new {new}",
            code="idempotency_key_reused",
        )
    return row
