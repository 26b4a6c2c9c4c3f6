"""Per-attempt Runner credentials, the host agent's credential, and where cloud credentials may come from.

A credential is derived from the server's secret, the attempt's external name and a
random nonce, so the server can hand the same credential again when a start is retried
(idempotent start) while the database holds only its SHA-256 and the nonce: a copy of
the database alone grants nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

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


# ---------------------------------------------------------------------------- where cloud credentials may come from
# A cloud connection names its credentials (`credentials_ref`) and files such as a CA (`options.ca_file`);
# CloudPivot then sends what it read there to the connection's endpoint, or writes it into a VM's user
# data. Whoever may edit a connection could otherwise have the server send any file it can read (the
# secret key, the database) or any variable (DJANGO_SECRET_KEY) to a host of their choosing. So both
# come only from an allowlisted place: files under settings.CREDENTIALS_DIR (symlinks resolved),
# environment variables named CLOUDPIVOT_CLOUD_*. Checked when a connection is saved in the admin
# (CloudConnection.clean) and again by every backend before it reads anything (a row may come from
# elsewhere), so check_cloud and the health page say the same words.
ENV_PREFIX = "CLOUDPIVOT_CLOUD_"
FILE_REF_PREFIXES = ("token-file:", "kubeconfig:", "file:")
FILE_OPTIONS = ("ca_file",)
_ENV_NAME = re.compile(rf"{ENV_PREFIX}[A-Z0-9_]+")


class CredentialsNotAllowed(ValueError):
    """A credentials reference or a file option that points outside the allowlisted places."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def credentials_dir() -> Path:
    """settings.CREDENTIALS_DIR (env CLOUDPIVOT_CREDENTIALS_DIR, default var/credentials), symlinks resolved."""
    return Path(settings.CREDENTIALS_DIR).resolve()


def allowed_env_name(name: str, *, field: str = "credentials_ref") -> str:
    if not _ENV_NAME.fullmatch(name):
        raise CredentialsNotAllowed(
            f"the environment variable {name!r} may not be used: only variables named {ENV_PREFIX}… hold "
            "cloud credentials (so no other secret of the server, such as DJANGO_SECRET_KEY, can be sent)",
            field=field,
        )
    return name


def allowed_file(path: str, *, field: str = "credentials_ref") -> str:
    """The file's absolute path if it lies under the credentials directory (after resolving symlinks)."""
    where = credentials_dir()
    if not path or not os.path.isabs(path):
        raise CredentialsNotAllowed(f"{path!r} is not an absolute path under {where}", field=field)
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(where):
        raise CredentialsNotAllowed(
            f"{path} is not under the credentials directory {where} (CLOUDPIVOT_CREDENTIALS_DIR): only files "
            "there may be read as cloud credentials or CA certificates",
            field=field,
        )
    return str(resolved)


def check_credentials_ref(ref: str) -> None:
    """Refuse a `credentials_ref` that names anything but an allowlisted variable or file.

    Forms: "" (none), `in-cluster`, `env:NAME`, `token-file:PATH`, `kubeconfig:PATH`, `file:PATH`, or a bare PATH.
    """
    ref = (ref or "").strip()
    if ref in ("", "in-cluster"):
        return
    if ref.startswith("env:"):
        allowed_env_name(ref[len("env:") :])
        return
    for prefix in FILE_REF_PREFIXES:
        if ref.startswith(prefix):
            allowed_file(ref[len(prefix) :])
            return
    allowed_file(ref)


def check_connection_sources(*, credentials_ref: str, options: dict | None) -> None:
    """Both places a connection names: its credentials reference and its file options (a CA bundle)."""
    check_credentials_ref(credentials_ref)
    for key in FILE_OPTIONS:
        value = (options or {}).get(key) if isinstance(options, dict) else None
        if value:
            allowed_file(str(value), field=f"options.{key}")
