"""Users' SSH public keys: reading one OpenSSH public key line, and keeping it in the user's settings.

A key is checked, not trusted: the type word, base64 that decodes, the type written inside the blob agreeing
with the word (SSH wire format), and the key itself loading (cryptography) where it can check the type.
Whatever is pasted by mistake — a private key, above all — is refused with words that never repeat the
pasted text, so it reaches no response, log or page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from dataclasses import dataclass

from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from cloudpivot.accounts.models import SshKey
from cloudpivot.exceptions import InvalidSpec

FIELD = "public_key"
# What an instance's authorized_keys may hold; DSA is refused (OpenSSH dropped it), as are certificates.
KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
CHECKED_BY_CRYPTOGRAPHY = set(KEY_TYPES[:5])  # the sk- (security key) types it cannot load
MIN_RSA_BITS = 2048
MAX_LENGTH = 16384  # an RSA 16384-bit key line is about 2.8 kB; anything far longer is not one key
# PEM and OpenSSH private keys, PuTTY's, and an OpenSSH private key's body without its armour lines
_PRIVATE = re.compile(r"PRIVATE KEY|PuTTY-User-Key-File|^\s*b3BlbnNzaC1rZXktdjE", re.MULTILINE)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$"
NAME_WORDS = "letters, digits, '.', '_', '@' and '-', starting with a letter or digit (at most 64)"


@dataclass(frozen=True)
class PublicKey:
    key_type: str
    blob: bytes
    comment: str

    @property
    def fingerprint(self) -> str:
        """As `ssh-keygen -l -E sha256` prints it: SHA256 of the blob, base64 without padding."""
        return "SHA256:" + base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")

    @property
    def line(self) -> str:
        """The normalised authorized_keys line (one space between parts, no options)."""
        encoded = base64.b64encode(self.blob).decode()
        return f"{self.key_type} {encoded} {self.comment}".rstrip()


def _refuse(message: str) -> InvalidSpec:
    return InvalidSpec(message, errors=[{"field": FIELD, "message": message}])


def parse_public_key(text: str) -> PublicKey:
    """One OpenSSH public key line (`ssh-ed25519 AAAA… comment`), or InvalidSpec on `public_key`."""
    if not isinstance(text, str) or not text.strip():
        raise _refuse("paste one SSH public key line (the contents of a .pub file, e.g. ~/.ssh/id_ed25519.pub)")
    if _PRIVATE.search(text):
        raise _refuse(
            "this is a private key: never share it. Paste the public key instead (the .pub file next to it, "
            "or the output of `ssh-keygen -y -f <private key>`); what was sent has not been kept"
        )
    if "-----BEGIN" in text or "---- BEGIN" in text:
        raise _refuse(
            "this is a PEM or RFC 4716 key block; paste the OpenSSH one-line form "
            "(`ssh-keygen -i -f <file>` converts it)"
        )
    if len(text) > MAX_LENGTH:
        raise _refuse(f"too long for one public key ({len(text)} characters; at most {MAX_LENGTH})")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) != 1:
        raise _refuse(f"one key per entry: {len(lines)} lines were sent; add each key on its own")
    parts = lines[0].split(None, 2)
    key_type = parts[0]
    if key_type not in KEY_TYPES:
        known = ", ".join(KEY_TYPES)
        if key_type.endswith("-cert-v01@openssh.com"):
            raise _refuse(f"SSH certificates are not accepted; paste the plain public key (one of: {known})")
        raise _refuse(
            "not an OpenSSH public key line: it must start with the key type "
            f"(one of: {known}), then the base64 key and an optional comment"
        )
    if len(parts) < 2:
        raise _refuse(f"the base64 key is missing after {key_type}")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise _refuse("the key part is not valid base64 (was it cut or wrapped when copied?)") from None
    if _inner_type(blob) != key_type:
        raise _refuse(f"the key data does not hold a {key_type} key (was it cut or edited when copied?)")
    if key_type in CHECKED_BY_CRYPTOGRAPHY:
        try:
            key = load_ssh_public_key(f"{key_type} {parts[1]}".encode())
        except (ValueError, TypeError):
            raise _refuse(f"the key data is not a valid {key_type} key (was it cut when copied?)") from None
        bits = getattr(key, "key_size", None)
        if key_type == "ssh-rsa" and bits is not None and bits < MIN_RSA_BITS:
            raise _refuse(f"an RSA key of {bits} bits is too weak; use at least {MIN_RSA_BITS} bits, or ed25519")
    comment = parts[2].strip() if len(parts) > 2 else ""
    return PublicKey(key_type=key_type, blob=blob, comment=comment)


def _inner_type(blob: bytes) -> str:
    """The key type the SSH wire format writes first in the blob: uint32 length, then the name."""
    if len(blob) < 4:
        return ""
    (length,) = struct.unpack(">I", blob[:4])
    if length > 64 or len(blob) < 4 + length:
        return ""
    return blob[4 : 4 + length].decode("ascii", "replace")


def ssh_key_create(*, user: AbstractBaseUser, name: str, public_key: str) -> SshKey:
    """Keep a public key under a name; the name and the key are each unique per user."""
    if not re.match(NAME_PATTERN, name or ""):
        raise InvalidSpec(f"key name: {NAME_WORDS}", errors=[{"field": "name", "message": NAME_WORDS}])
    parsed = parse_public_key(public_key)
    if SshKey.objects.filter(user=user, name=name).exists():
        message = f"you already have a key named {name}; delete it first or choose another name"
        raise InvalidSpec(message, errors=[{"field": "name", "message": message}])
    same = SshKey.objects.filter(user=user, fingerprint=parsed.fingerprint).first()
    if same is not None:
        raise _refuse(f"you already keep this key, as {same.name} ({same.fingerprint})")
    try:
        with transaction.atomic():
            return SshKey.objects.create(
                user=user,
                name=name,
                key_type=parsed.key_type,
                public_key=parsed.line,
                fingerprint=parsed.fingerprint,
            )
    except IntegrityError:  # a twin request won the race: the same answer as above
        message = f"you already have a key named {name} or this key under another name"
        raise InvalidSpec(message, errors=[{"field": "name", "message": message}]) from None


def ssh_key_delete(*, key: SshKey) -> None:
    """Forget a key. Instances already made keep it in their guest (authorized_keys is written at boot)."""
    key.delete()


def keys_for_instance(*, user: AbstractBaseUser, names: list[str] | None) -> list[SshKey]:
    """The owner's keys an instance gets: the named ones (each must exist: 400 on `ssh_keys`), or all
    of the owner's keys when no list is given. An empty list means none."""
    owned = {key.name: key for key in SshKey.objects.filter(user=user)}
    if names is None:
        return list(owned.values())
    unknown = [name for name in names if name not in owned]
    if unknown:
        have = ", ".join(sorted(owned)) or "none yet (add them under Settings → SSH keys)"
        message = f"unknown SSH key {', '.join(unknown)}: your keys are {have}"
        raise InvalidSpec(message, errors=[{"field": "ssh_keys", "message": message}])
    return [owned[name] for name in dict.fromkeys(names)]
