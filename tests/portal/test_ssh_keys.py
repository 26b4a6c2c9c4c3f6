"""SSH public keys in a user's settings, through /api/v1/ssh-keys and the settings page (Django's client).

Keys are made by the real `ssh-keygen`, which also gives the fingerprint CloudPivot must show. A private key
pasted by mistake is refused on its field and never comes back: not in the answer, the page or the log.
"""

from __future__ import annotations

import logging
import subprocess

import pytest

from cloudpivot.accounts.models import SshKey

pytestmark = pytest.mark.django_db


def keygen(tmp_path, kind: str = "ed25519", comment: str = "bob@laptop", bits: int | None = None):
    """(public line, private key text, fingerprint as ssh-keygen -l prints it)."""
    path = tmp_path / f"id_{kind}_{bits or ''}"
    args = ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", comment, "-f", str(path)]
    subprocess.run([*args, *(["-b", str(bits)] if bits else [])], check=True)
    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{path}.pub"], check=True, capture_output=True, text=True
    ).stdout.split()[1]
    public = (path.parent / f"{path.name}.pub").read_text().strip()
    return public, path.read_text(), fingerprint


def test_a_key_is_added_listed_with_its_fingerprint_and_deleted(api, world, tmp_path):
    line, _, fingerprint = keygen(tmp_path)
    created = api("bob").post("/api/v1/ssh-keys", {"name": "laptop", "public_key": line + "\n"}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["fingerprint"] == fingerprint and fingerprint.startswith("SHA256:")
    assert body["key_type"] == "ssh-ed25519" and body["public_key"] == line
    rsa, _, rsa_fingerprint = keygen(tmp_path, "rsa", "bob@desk", bits=3072)
    assert api("bob").post("/api/v1/ssh-keys", {"name": "desk", "public_key": rsa}, format="json").status_code == 201
    listed = api("bob").get("/api/v1/ssh-keys").json()
    assert [(k["name"], k["fingerprint"]) for k in listed] == [("desk", rsa_fingerprint), ("laptop", fingerprint)]

    # another user sees none of them and cannot delete them
    assert api("alice").get("/api/v1/ssh-keys").json() == []
    assert api("alice").delete(f"/api/v1/ssh-keys/{body['id']}").status_code == 404
    assert api("bob").delete(f"/api/v1/ssh-keys/{body['id']}").status_code == 204
    assert [k["name"] for k in api("bob").get("/api/v1/ssh-keys").json()] == ["desk"]


def test_a_private_key_is_refused_on_its_field_and_never_echoed_or_logged(api, world, tmp_path, caplog):
    _, private, _ = keygen(tmp_path)
    secret_line = private.splitlines()[1]  # a line of the key's body
    caplog.set_level(logging.DEBUG)
    refused = api("bob").post("/api/v1/ssh-keys", {"name": "oops", "public_key": private}, format="json")
    assert refused.status_code == 400
    body = refused.json()
    assert body["errors"][0]["field"] == "public_key" and "private key" in body["errors"][0]["message"]
    assert secret_line not in refused.content.decode()
    assert secret_line not in caplog.text and "PRIVATE KEY-----" not in caplog.text
    # the body alone, without its armour lines, is a private key too
    body_only = "".join(private.splitlines()[1:-1])
    again = api("bob").post("/api/v1/ssh-keys", {"name": "oops", "public_key": body_only}, format="json")
    assert again.status_code == 400 and "private key" in again.json()["errors"][0]["message"]
    assert secret_line not in again.content.decode()
    assert not SshKey.objects.exists()


@pytest.mark.parametrize(
    ("public_key", "words"),
    [
        ("", "paste one SSH public key"),
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "must start with the key type"),
        ("ssh-ed25519", "base64 key is missing"),
        ("ssh-ed25519 not*base64", "not valid base64"),
        # a valid RSA blob under the ed25519 word
        ("ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ==", "does not hold a ssh-ed25519 key"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==", "not a valid ssh-ed25519 key"),  # cut short
        ("-----BEGIN SSH2 PUBLIC KEY-----\nAAAA\n-----END SSH2 PUBLIC KEY-----", "ssh-keygen -i"),
    ],
)
def test_what_is_not_one_public_key_is_refused_on_its_field(api, world, public_key, words):
    refused = api("bob").post("/api/v1/ssh-keys", {"name": "k", "public_key": public_key}, format="json")
    assert refused.status_code == 400, refused.json()
    errors = refused.json()["errors"]
    assert errors[0]["field"] == "public_key" and words in errors[0]["message"], errors


def test_weak_rsa_two_keys_at_once_duplicates_and_bad_names_are_refused(api, world, tmp_path):
    weak, _, _ = keygen(tmp_path, "rsa", bits=1024)
    refused = api("bob").post("/api/v1/ssh-keys", {"name": "old", "public_key": weak}, format="json")
    assert refused.status_code == 400 and "1024 bits is too weak" in refused.json()["message"]
    one, _, _ = keygen(tmp_path)
    two, _, _ = keygen(tmp_path, "ecdsa")
    refused = api("bob").post("/api/v1/ssh-keys", {"name": "both", "public_key": f"{one}\n{two}"}, format="json")
    assert refused.status_code == 400 and "one key per entry" in refused.json()["message"]
    assert api("bob").post("/api/v1/ssh-keys", {"name": "a", "public_key": one}, format="json").status_code == 201
    same_name = api("bob").post("/api/v1/ssh-keys", {"name": "a", "public_key": two}, format="json")
    assert same_name.status_code == 400 and same_name.json()["errors"][0]["field"] == "name"
    same_key = api("bob").post("/api/v1/ssh-keys", {"name": "b", "public_key": one}, format="json")
    assert same_key.status_code == 400 and "already keep this key, as a" in same_key.json()["message"]
    bad_name = api("bob").post("/api/v1/ssh-keys", {"name": "my key", "public_key": two}, format="json")
    assert bad_name.status_code == 400 and bad_name.json()["errors"][0]["field"] == "name"
    # another user may keep the same key under the same name
    assert api("alice").post("/api/v1/ssh-keys", {"name": "a", "public_key": one}, format="json").status_code == 201


def test_the_settings_page_adds_lists_and_deletes_keys_and_forgets_a_refused_one(pages, world, tmp_path):
    line, private, fingerprint = keygen(tmp_path)
    bob = pages("bob")
    added = bob.post("/settings/ssh-keys/", {"name": "laptop", "public_key": line})
    assert added.status_code == 302 and added["Location"].endswith("/settings/#ssh-keys")
    page = bob.get("/settings/").content.decode()
    assert 'data-ssh-key-row="laptop"' in page and fingerprint in page and "bob@laptop" in page
    assert 'data-ssh-key-row="laptop"' not in pages("alice").get("/settings/").content.decode()

    refused = bob.post("/settings/ssh-keys/", {"name": "oops", "public_key": private})
    assert refused.status_code == 400
    content = refused.content.decode()
    assert "this is a private key" in content and private.splitlines()[1] not in content

    key = SshKey.objects.get(user=world.bob, name="laptop")
    assert pages("alice").post(f"/settings/ssh-keys/{key.pk}/delete").status_code == 404
    assert bob.post(f"/settings/ssh-keys/{key.pk}/delete").status_code == 302
    assert not SshKey.objects.filter(user=world.bob).exists()
