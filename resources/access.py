"""How a user gets into their instance by SSH: the keys it is given, the user they log in as, the command.

The keys reach the guest through cloud-init user data on every cloud (OpenStack: Nova user_data; KubeVirt:
a cloudInitNoCloud volume), not through a Nova key pair (one key per server, held by the connection's
cloud user, so a per-owner pair would be cloud state to create and clean up) nor KubeVirt accessCredentials
(a Secret to create, own and delete, and a guest agent to propagate it). cloud-init creates the login user
itself, so its name is known whatever the image's default user is: the connection's `ssh_user` option, else
LOGIN_USER. The connection's `ssh_jump_host` option names the host to go through (`ssh -J`).
"""

from __future__ import annotations

import shlex

import yaml

from clusters.models import CloudConnection

LOGIN_USER = "cloudpivot"
SSH_PORT = 22


def login_user(connection: CloudConnection) -> str:
    return (connection.options or {}).get("ssh_user") or LOGIN_USER


def jump_host(connection: CloudConnection) -> str:
    return (connection.options or {}).get("ssh_jump_host") or ""


def ssh_port(connection: CloudConnection) -> int:
    """The port the guests' SSH servers listen on (the connection's `ssh_port` option, else 22)."""
    return int((connection.options or {}).get("ssh_port") or SSH_PORT)


def cloud_config(*, user: str, authorized_keys: list[str]) -> str:
    """The #cloud-config user data: the image's default user stays, and `user` is made with the keys
    (sudo without a password: the owner administers their own instance; no password login)."""
    document = {
        "users": [
            "default",
            {
                "name": user,
                "gecos": "CloudPivot instance owner",
                "shell": "/bin/bash",
                "sudo": "ALL=(ALL) NOPASSWD:ALL",
                "lock_passwd": True,
                "ssh_authorized_keys": list(authorized_keys),
            },
        ],
        "ssh_pwauth": False,
    }
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False, width=8192)


def ssh_command(*, user: str, address: str, jump: str = "", port: int = SSH_PORT) -> str:
    """`ssh [-J jump] [-p port] user@address`, quoted for a POSIX shell; an IPv6 address needs no brackets here."""
    parts = ["ssh"]
    if jump:
        parts += ["-J", jump]
    if port != SSH_PORT:
        parts += ["-p", str(port)]
    parts.append(f"{user}@{address}")
    return " ".join(shlex.quote(part) for part in parts)


def instance_ssh_command(instance) -> str:
    """The command for an instance, or "" while it has no address or was given no keys."""
    if not instance.address or not instance.ssh_keys or not instance.login_user:
        return ""
    connection = instance.connection
    return ssh_command(
        user=instance.login_user, address=instance.address, jump=jump_host(connection), port=ssh_port(connection)
    )


def user_data_for(instance) -> str:
    """What the create sends as user data ("" when the instance was given no keys: nothing to write)."""
    keys = [line for line in instance.authorized_keys.splitlines() if line.strip()]
    return cloud_config(user=instance.login_user, authorized_keys=keys) if keys else ""
