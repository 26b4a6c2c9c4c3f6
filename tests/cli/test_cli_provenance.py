"""`cloudpivot task provenance ID --verify` against the session Daphne, and `cloudpivot provenance verify FILE
--key PEM` offline: a bundle verifies with the installation's key, a changed byte does not (docs/cli.md)."""

from __future__ import annotations

import json

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.builders import finished

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_bundle_verifies_with_the_served_key_and_offline_and_a_changed_byte_is_refused(
    logged_in, daphne, world, tmp_path
):
    task = finished(world.bob, exit_code=4)
    saved = tmp_path / "provenance.json"
    fetched = logged_in("task", "provenance", str(task.pk), "-o", str(saved), "--verify")
    assert fetched.returncode == 0, fetched.stderr
    assert "valid Ed25519 signature" in fetched.stderr and f"task {task.pk} attempt 1" in fetched.stderr
    document = json.loads(saved.read_text())
    assert document["bundle"]["attempt"]["exit_code"] == 4 and document["signature"]["alg"] == "Ed25519"
    printed = logged_in("task", "provenance", str(task.pk))  # without -o: the document on stdout
    assert printed.returncode == 0 and json.loads(printed.stdout)["bundle"]["task"]["id"] == str(task.pk)

    # The key as someone outside keeps it: a PEM file obtained once (no token needed); then no server is asked.
    key = tmp_path / "cloudpivot.pem"
    key.write_text(httpx.get(f"{daphne.url}/api/v1/provenance/key").json()["public_key_pem"])
    offline = logged_in("provenance", "verify", str(saved), "--key", str(key), CLOUDPIVOT_URL="http://127.0.0.1:9")
    assert offline.returncode == 0, offline.stderr
    with_key = logged_in("task", "provenance", str(task.pk), "--verify", "--key", str(key))
    assert with_key.returncode == 0, with_key.stderr

    # One byte changed: the exit code 4 becomes 5.
    text = saved.read_text()
    assert text.count('"exit_code": 4') == 1
    tampered = tmp_path / "tampered.json"
    tampered.write_text(text.replace('"exit_code": 4', '"exit_code": 5'))
    refused = logged_in("provenance", "verify", str(tampered), "--key", str(key))
    assert refused.returncode == 92
    assert "NOT VALID" in refused.stderr and "changed after it was signed" in refused.stderr

    other = tmp_path / "other.pem"
    public = Ed25519PrivateKey.generate().public_key()
    other.write_bytes(public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    wrong = logged_in("provenance", "verify", str(saved), "--key", str(other))
    assert wrong.returncode == 92 and "signed by another key" in wrong.stderr
    missing = logged_in("provenance", "verify", str(saved), "--key", str(tmp_path / "nope.pem"))
    assert missing.returncode == 2 and "cannot read the key" in missing.stderr
