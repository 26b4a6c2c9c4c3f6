"""A way into an instance, as the tests set it up: SSH key pairs made by the real ssh-keygen, bob's keys kept,
the connection's ssh options (ssh_user, ssh_port, ssh_jump_host) set."""

from __future__ import annotations

import subprocess

from cloudpivot.accounts.ssh_keys import ssh_key_create
from clusters.models import CloudConnection


def keygen(tmp_path, name: str) -> tuple[str, str, str]:
    """(public line, private key, fingerprint as ssh-keygen prints it), made by the real ssh-keygen."""
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"bob@{name}", "-f", str(path)], check=True)
    printed = subprocess.run(["ssh-keygen", "-l", "-f", f"{path}.pub"], check=True, capture_output=True, text=True)
    return (tmp_path / f"{name}.pub").read_text().strip(), path.read_text(), printed.stdout.split()[1]


def keys_for_bob(world, tmp_path) -> dict[str, str]:
    """Two keys of bob's kept (laptop, desk): their public lines by name."""
    keys = {name: keygen(tmp_path, name)[0] for name in ("laptop", "desk")}
    for name, line in keys.items():
        ssh_key_create(user=world.bob, name=name, public_key=line)
    return keys


def set_options(connection: CloudConnection, **options) -> None:
    """These options added to the connection's, in the database only (the test's `connection` is not reread)."""
    CloudConnection.objects.filter(pk=connection.pk).update(options=connection.options | options)
