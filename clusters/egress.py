"""Outbound network of a task (docs/security.md#egress): what it asks (`network`), what its connection's policy
allows (the `egress` option), and what it gets: its effective egress, worked out once at submission and kept in
the task's normalized spec (`egress`), where every backend, the task page and the API read it.

A destination is an IP network (`10.0.0.0/8`, `192.0.2.7` meaning /32, `2001:db8::/32`), optionally with a TCP/UDP
port (`10.0.0.0/8:443`, `192.0.2.7:5432`, `[2001:db8::/32]:443`). Names are refused: what closes the network
(NetworkPolicy, security groups) matches addresses, not names.

The connection's policy: `{"default": "none" | "open", "allow": [destinations]}`, both keys optional.
- `default`: what a task that asks nothing (or `"default"`) gets; `open` when the connection sets no policy.
- `allow`: what a task may ask for by name when the default is `none`; where it is `open`, a task may narrow
  its egress to any list (it could reach everything anyway).
A task may always ask for `none`.

The effective egress: `"none"` (nothing out), `"open"` (the cloud's own network, unrestricted) or a list of
normalized destinations.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

NONE, OPEN, DEFAULT = "none", "open", "default"
MAX_DESTINATIONS = 50
POLICY_KEYS = ("default", "allow")
_WITH_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<v4>[0-9./]+)):(?P<port>[0-9]{1,5})$")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_destination(text: Any) -> tuple[Network, int | None]:
    """(network, port or None) of one destination; ValueError with the reason in words."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("must be a CIDR or an address, with an optional port, e.g. 10.0.0.0/8 or 192.0.2.7:443")
    text = text.strip()
    address, port = text, None
    match = _WITH_PORT.match(text)
    if match:
        address, port = match.group("v6") or match.group("v4"), int(match.group("port"))
        if not 1 <= port <= 65535:
            raise ValueError(f"{text!r}: the port must be 1 to 65535")
    elif text.startswith("["):
        raise ValueError(f"{text!r}: an IPv6 destination with a port is written [2001:db8::/32]:443")
    try:
        network = ipaddress.ip_network(address, strict=True)
    except ValueError as exc:
        if "has host bits set" in str(exc):
            raise ValueError(
                f"{text!r}: the address has bits set beyond its prefix; write the network, e.g. "
                f"{ipaddress.ip_network(address, strict=False)}"
            ) from None
        raise ValueError(
            f"{text!r} is not an IP address or CIDR (host names are not accepted: write the address), "
            "with an optional port, e.g. 10.0.0.0/8, 192.0.2.7:443 or [2001:db8::/32]:443"
        ) from None
    return network, port


def format_destination(network: Network, port: int | None) -> str:
    if port is None:
        return str(network)
    return f"[{network}]:{port}" if network.version == 6 else f"{network}:{port}"


def destinations_normalize(values: Any) -> tuple[list[str], dict[int, str]]:
    """(normalized destinations, {index: problem}) of a list; the problems name each wrong entry."""
    if not isinstance(values, list):
        return [], {-1: 'must be "none", "default" or a list of destinations, e.g. ["10.0.0.0/8:443"]'}
    if not values:
        return [], {-1: 'an empty list: write "none" to close the network'}
    if len(values) > MAX_DESTINATIONS:
        return [], {-1: f"at most {MAX_DESTINATIONS} destinations"}
    out: list[str] = []
    problems: dict[int, str] = {}
    for index, value in enumerate(values):
        try:
            normalized = format_destination(*parse_destination(value))
        except ValueError as exc:
            problems[index] = str(exc)
            continue
        if normalized not in out:
            out.append(normalized)
    return out, problems


def policy_problem(value: Any) -> str:
    """Why a connection's `egress` option is wrong ("" when it is fine)."""
    shape = '\'egress\' must be an object like {"default": "none", "allow": ["10.0.0.0/8:443"]}'
    if not isinstance(value, dict):
        return shape
    unknown = sorted(set(value) - set(POLICY_KEYS))
    if unknown:
        return f"{shape}; unknown key {unknown[0]!r}"
    if value.get("default", OPEN) not in (NONE, OPEN):
        return f'\'egress.default\' must be "none" or "open", not {value.get("default")!r}'
    if value.get("allow") not in (None, []):
        _, problems = destinations_normalize(value["allow"])
        if problems:
            index = min(problems)
            where = "'egress.allow'" if index < 0 else f"'egress.allow' entry {index}"
            return f"{where}: {problems[index]}"
    return ""


def policy_of(options: dict[str, Any] | None) -> dict[str, Any]:
    """The connection's policy with its defaults: {"default": "open"|"none", "allow": [normalized]}."""
    raw = (options or {}).get("egress") or {}
    allow, _ = destinations_normalize(raw.get("allow") or [])
    return {"default": raw.get("default", OPEN), "allow": allow}


def _covers(allowed: str, wanted: str) -> bool:
    net_a, port_a = parse_destination(allowed)
    net_w, port_w = parse_destination(wanted)
    if net_a.version != net_w.version or not net_w.subnet_of(net_a):  # type: ignore[arg-type]
        return False
    return port_a is None or port_a == port_w


def effective_egress(network: Any, options: dict[str, Any] | None) -> tuple[Any, list[str]]:
    """(effective egress, destinations the policy refuses) of a task's `network` on a connection."""
    policy = policy_of(options)
    if network in (None, DEFAULT):
        return policy["default"], []
    if network == NONE:
        return NONE, []
    if policy["default"] == OPEN:
        return list(network), []
    refused = [item for item in network if not any(_covers(allowed, item) for allowed in policy["allow"])]
    return list(network), refused


def task_egress(spec: dict[str, Any] | None) -> Any:
    """A task's effective egress from its normalized spec; a task submitted before egress existed is `open`."""
    return (spec or {}).get("egress", OPEN)


def egress_words(egress: Any) -> str:
    """The effective egress in words, for the task page."""
    if egress == NONE:
        return "none: the program has no outbound network"
    if egress == OPEN or egress is None:
        return "open: the cloud's own network, not restricted by CloudPivot"
    return "only to " + ", ".join(egress)
