"""`cloudpivot task provenance ID [--verify]` and `cloudpivot provenance verify FILE --key PEM` (docs/cli.md).

A provenance document is `{"bundle": {...}, "signature": {"alg": "Ed25519", "key_id", "value"}}`: the signature
covers the canonical JSON bytes of `bundle` (keys sorted, separators "," and ":", not ASCII-escaped, UTF-8).
Verifying needs only the installation's public key: `provenance verify` never contacts CloudPivot.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import sys
from pathlib import Path

from cloudpivot_cli import exitcodes, follow
from cloudpivot_cli.parsing import UsageError, add_command, add_group, connect

KEY_PATH = "/api/v1/provenance/key"
EXAMPLES = """\
  cloudpivot provenance verify provenance.json --key cloudpivot-provenance.pem   # offline
"""


class Invalid(Exception):
    """The document does not verify: the words say why."""


def canonical(bundle: object) -> bytes:
    return json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def verify(document: object, public_key_pem: str) -> str:
    """The key id the document verifies with, or Invalid."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:  # pragma: no cover - a dependency of the CLI; only a hand-made install lacks it
        raise Invalid("verifying needs the `cryptography` package: pip install cryptography") from None
    try:
        key = serialization.load_pem_public_key(public_key_pem.encode())
    except ValueError:
        raise Invalid("the key is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise Invalid("the key is not an Ed25519 public key")
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    key_id = hashlib.sha256(raw).hexdigest()
    if not isinstance(document, dict) or not isinstance(document.get("signature"), dict) or "bundle" not in document:
        raise Invalid("not a provenance document (it needs `bundle` and `signature`)")
    signature = document["signature"]
    if signature.get("alg") != "Ed25519":
        raise Invalid(f"unknown signature algorithm {signature.get('alg')!r}")
    if signature.get("key_id") != key_id:
        raise Invalid(f"signed by another key (key id {signature.get('key_id')}); this key's id is {key_id}")
    try:
        key.verify(base64.b64decode(str(signature.get("value")), validate=True), canonical(document["bundle"]))
    except (InvalidSignature, binascii.Error):
        raise Invalid("the signature does not match the bundle: it was changed after it was signed") from None
    return key_id


def _read_key(path: str) -> str:
    """A PEM file, or the JSON answer of GET /api/v1/provenance/key saved to a file."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the key {path}: {exc}") from None
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)["public_key_pem"]
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{path} is neither a PEM key nor the answer of {KEY_PATH}") from None
    return text


def _report(document: dict, pem: str, where: str) -> int:
    try:
        key_id = verify(document, pem)
    except Invalid as exc:
        print(f"cloudpivot: {where}: NOT VALID: {exc}", file=sys.stderr)
        return exitcodes.PROVENANCE_INVALID
    bundle = document["bundle"]
    what = f"task {bundle.get('task', {}).get('id')} attempt {bundle.get('attempt', {}).get('number')}"
    print(f"{where}: valid Ed25519 signature of {what} (key id {key_id})", file=sys.stderr)
    return exitcodes.OK


def task_provenance(args) -> int:
    client = connect(args)
    document = client.get(f"{follow.task_path(args.id)}/provenance", attempt=args.attempt)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if args.file:
        Path(args.file).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if not args.verify:
        return exitcodes.OK
    pem = _read_key(args.key) if args.key else client.get(KEY_PATH)["public_key_pem"]
    return _report(document, pem, args.file or "the provenance")


def verify_file(args) -> int:
    try:
        document = json.loads(Path(args.file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"cloudpivot: {args.file}: NOT VALID: not readable as JSON ({exc})", file=sys.stderr)
        return exitcodes.PROVENANCE_INVALID
    return _report(document, _read_key(args.key), args.file)


def register_task(commands) -> None:
    p = add_command(
        commands,
        "provenance",
        "an ended attempt's signed provenance bundle; --verify checks its Ed25519 signature",
        task_provenance,
        "  cloudpivot task provenance ID -o provenance.json --verify\n"
        "  cloudpivot task provenance ID --attempt 1 --verify --key cloudpivot-provenance.pem\n",
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("--attempt", type=int, metavar="N", help="this attempt (default: the latest)")
    p.add_argument("-o", "--output", dest="file", metavar="FILE", help="write the document here (default: stdout)")
    p.add_argument(
        "--verify", action="store_true", help=f"verify the signature (exit {exitcodes.PROVENANCE_INVALID} if not)"
    )
    p.add_argument(
        "--key", metavar="FILE", help=f"the public key (PEM) to verify with, instead of the server's {KEY_PATH}"
    )


def register(commands) -> None:
    group = add_group(commands, "provenance", "verify provenance bundles offline", EXAMPLES)
    p = add_command(
        group,
        "verify",
        "check a saved provenance document's signature with a public key, without contacting CloudPivot",
        verify_file,
        EXAMPLES,
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--key", metavar="PEM", required=True, help=f"the installation's public key (PEM, or {KEY_PATH}'s answer)"
    )
