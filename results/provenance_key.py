"""The installation's Ed25519 key that signs provenance bundles (docs/data.md, "Provenance").

Kept in CLOUDPIVOT_PROVENANCE_KEY_FILE (default var/provenance-ed25519.pem), made on first use with mode 0600.
Two processes that make it at once both end up with the same key: each writes a private temporary file and
links it to the name, which only one link can take (the loser reads the winner's). The private key never
leaves this module: not in logs, pages, errors or bundles; only its public half is served.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from cloudpivot.exceptions import ApplicationError

_lock = threading.Lock()
_loaded: dict[str, Ed25519PrivateKey] = {}


@dataclass(frozen=True)
class PublicKey:
    pem: str  # SubjectPublicKeyInfo, as `openssl pkey -pubin` reads it
    raw: str  # the 32 raw bytes, base64
    key_id: str  # SHA-256 of the raw bytes, hex


class KeyUnavailable(ApplicationError):
    """The key file cannot be read or made; the message names the file, never its content."""

    code = "provenance_key_unavailable"
    status = 503


def _path() -> Path:
    return Path(settings.PROVENANCE_KEY_FILE)


def _create(path: Path) -> None:
    """Write a new key under a private temporary name, then link it to `path` unless another process did first."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)  # atomic, and never replaces a key another process made meanwhile
        except FileExistsError:
            pass
    finally:
        temporary.unlink(missing_ok=True)


def signing_key() -> Ed25519PrivateKey:
    """The installation's private key, made on first use."""
    path = _path()
    with _lock:
        key = _loaded.get(str(path))
        if key is not None:
            return key
        try:
            if not path.exists():
                _create(path)
            loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise KeyUnavailable(f"the provenance key {path} cannot be read or made ({reason})") from None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise KeyUnavailable(f"the provenance key {path} is not an Ed25519 key")
        _loaded[str(path)] = loaded
        return loaded


def public_key() -> PublicKey:
    public = signing_key().public_key()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return PublicKey(pem=pem.decode(), raw=base64.b64encode(raw).decode(), key_id=hashlib.sha256(raw).hexdigest())


def sign(data: bytes) -> str:
    """The detached Ed25519 signature of `data`, base64."""
    return base64.b64encode(signing_key().sign(data)).decode()
