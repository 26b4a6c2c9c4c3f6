"""An attempt's egress as a Neutron security group (docs/security.md#egress), named after the attempt.

Made before the server and given to it instead of the connection's `security_groups` (security groups add up:
another group's allow-all egress would open what this one closes). Neutron's own allow-all egress rules of a new
group are removed; what stays open:
- the host program's path to CloudPivot: the callback URL's address(es) and port, TCP (and DNS, UDP/TCP 53, when
  the callback URL names a host rather than an address, so the VM can resolve it);
- the metadata service (169.254.169.254, TCP 80), which cloud-init reads;
- for a list of destinations, each of them (its port TCP and UDP, or every protocol when it names no port).
With `none` the program also runs in a network namespace of its own (the host program's supervisor), so even the
path to CloudPivot is the host program's alone. No rule lets anything in: replies to what goes out come back
(security groups are stateful). Deleted once the server is gone (cleanup).
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from typing import Any

from clusters.backends.base import AttemptRef, BackendError
from clusters.backends.openstack.client import OpenStackClient
from clusters.egress import NONE, OPEN, parse_destination, task_egress

METADATA = "169.254.169.254/32"
DESCRIPTION = "CloudPivot: egress of attempt {name} (installation {installation}); deleted with its server"


def closes(attempt: AttemptRef) -> bool:
    return task_egress(attempt.spec) != OPEN


def group_name(attempt: AttemptRef) -> str:
    return attempt.external_name


def callback_destinations(callback_url: str) -> tuple[list[str], int, bool]:
    """(the callback host's networks as /32 or /128, its port, whether it is a name that needs DNS)."""
    parts = urllib.parse.urlsplit(callback_url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        return [str(ipaddress.ip_network(host))], port, False
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)}
    except OSError as exc:
        raise BackendError(
            f"cannot close the network of the task: the callback URL's host {host!r} does not resolve ({exc})",
            kind="transient",
        ) from None
    return sorted(str(ipaddress.ip_network(address.split("%")[0])) for address in found), port, True


def egress_rules(egress: Any, callback_url: str) -> list[dict[str, Any]]:
    """The group's egress rules (Neutron's fields) for an effective egress that is not `open`."""
    networks, port, needs_dns = callback_destinations(callback_url)
    rules = [_rule(network, "tcp", port) for network in networks]
    if needs_dns:
        rules += [_rule(anywhere, protocol, 53) for anywhere in ("0.0.0.0/0", "::/0") for protocol in ("udp", "tcp")]
    rules.append(_rule(METADATA, "tcp", 80))
    if egress != NONE:
        for destination in egress:
            network, wanted = parse_destination(destination)
            if wanted is None:
                rules.append(_rule(str(network), None, None))
            else:
                rules += [_rule(str(network), protocol, wanted) for protocol in ("tcp", "udp")]
    unique: list[dict[str, Any]] = []
    for rule in rules:
        if rule not in unique:
            unique.append(rule)
    return unique


def _rule(network: str, protocol: str | None, port: int | None) -> dict[str, Any]:
    version = ipaddress.ip_network(network).version
    rule: dict[str, Any] = {
        "direction": "egress",
        "ethertype": f"IPv{version}",
        "remote_ip_prefix": network,
        "protocol": protocol,
    }
    if port is not None:
        rule |= {"port_range_min": port, "port_range_max": port}
    return rule


def ensure_group(client: OpenStackClient, attempt: AttemptRef, *, callback_url: str, installation: str) -> str:
    """The id of the attempt's security group, made (with its rules) unless one of ours exists already."""
    conn = client.conn()
    name = group_name(attempt)
    description = DESCRIPTION.format(name=name, installation=installation)
    for group in _groups_named(client, name):
        if group.description == description:
            return group.id
    group = client.call(
        f"creating security group {name}", conn.network.create_security_group, name=name, description=description
    )
    for rule in list(group.security_group_rules or []):  # Neutron's default: everything out, IPv4 and IPv6
        if rule.get("direction") == "egress":
            client.call(f"closing security group {name}", conn.network.delete_security_group_rule, rule["id"])
    for rule in egress_rules(task_egress(attempt.spec), callback_url):
        client.call(
            f"adding an egress rule to security group {name}",
            conn.network.create_security_group_rule,
            security_group_id=group.id,
            **rule,
        )
    return group.id


def delete_group(client: OpenStackClient, attempt: AttemptRef, *, installation: str) -> bool:
    """Delete the attempt's security group(s) of ours; True once none is left (a port still using it: False)."""
    name = group_name(attempt)
    description = DESCRIPTION.format(name=name, installation=installation)
    left = False
    for group in _groups_named(client, name):
        if group.description != description:
            continue
        try:
            client.call(f"deleting security group {name}", client.conn().network.delete_security_group, group.id)
        except BackendError as exc:
            if exc.kind == "not_found":
                continue
            if "in use" in exc.message or "InUse" in exc.message or "409" in exc.message:
                left = True  # the server's port goes a moment after the server: the next cleanup pass
                continue
            raise
    return not left


def _groups_named(client: OpenStackClient, name: str) -> list[Any]:
    conn = client.conn()
    groups = client.call(f"looking up security group {name}", lambda: list(conn.network.security_groups(name=name)))
    return [group for group in groups if group.name == name]
