"""Posting one webhook: the target is checked and connected to as one step, and the whole exchange has a deadline.

The host is resolved once (`resolve`), every address is checked, and the connection goes to an address that was
checked: a name that answers a public address to the check and loopback to the connection (DNS rebinding) gets
nowhere. The name still goes where it belongs: in the Host header, and for https in the TLS handshake (SNI) and
the certificate's hostname check. The post ends within DEADLINE_SECONDS whatever the receiver does (a socket
timeout bounds each read, and a receiver answering one byte a second never lets it run out): at the deadline a
watchdog shuts the socket down. Every failure is an answer of its own (status None and the reason in words),
never an exception.
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

DEADLINE_SECONDS = 10.0
REASON_CHARS = 200
# IPv6 prefixes that carry an IPv4 address (RFC 6052 NAT64, RFC 8215 local-use NAT64): what they reach is the
# IPv4 address inside, which must be global too. 6to4 (2002::/16) and IPv4-mapped addresses are read by ipaddress.
NAT64 = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")
HEADER_BREAKS = re.compile(r"[\r\n\x00]+")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def resolve(host: str, port: int) -> list[str]:
    """The addresses of `host`, each once, in the resolver's order: CloudPivot's one lookup per post."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def header_value(value: object) -> str:
    """`value` on one line: CR, LF and NUL become a space (a header value must never start a header of its own)."""
    return HEADER_BREAKS.sub(" ", str(value))


def embedded_ipv4(ip: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries and reaches (IPv4-mapped, 6to4, NAT64), else None."""
    if ip.version == 4:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64 or ip in NAT64_LOCAL_USE:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(address: str) -> str | None:
    """Why an address is no place to post to (None: it is global), the IPv4 inside an IPv6 address included."""
    ip = ipaddress.ip_address(address.split("%")[0])
    for each in (ip, embedded_ipv4(ip)):
        if each is not None and (not each.is_global or each.is_multicast):
            inside = f" (it reaches {each})" if each is not ip else ""
            return f"a private, loopback, link-local or otherwise non-global address: {ip}{inside}"
    if ip in NAT64_LOCAL_USE:
        return f"a local-use NAT64 address: {ip}"
    return None


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[str, ...]


def private_targets_allowed() -> bool:
    return bool(getattr(settings, "WEBHOOK_ALLOW_PRIVATE_TARGETS", False))


def url_refusal(url: str) -> str | None:
    """What is wrong with the URL itself (None: an http(s) URL with a host and a valid port)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "only http:// and https:// URLs with a host are delivered to"
    try:
        parts.port  # noqa: B018 (a port out of range raises)
    except ValueError:
        return "the URL's port is not a port"
    return None


def target_check(url: str) -> tuple[Target | None, str | None]:
    """Resolve the URL's host once and check every address; the Target holds the addresses to connect to."""
    refusal = url_refusal(url)
    if refusal:
        return None, refusal
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = resolve(parts.hostname, port)
    except (OSError, UnicodeError) as exc:
        return None, f"the host {parts.hostname} does not resolve ({getattr(exc, 'strerror', None) or exc})"
    if not addresses:
        return None, f"the host {parts.hostname} does not resolve"
    if not private_targets_allowed():
        for address in addresses:
            refusal = address_refusal(address)
            if refusal:
                return None, (
                    f"{parts.hostname} is {refusal}; an administrator may allow those (WEBHOOK_ALLOW_PRIVATE_TARGETS)"
                )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path, tuple(addresses)), None


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to a checked address; `host` (the name) is what the Host header says."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address
        self.raw: socket.socket | None = None

    def connect(self) -> None:
        self.raw = socket.create_connection((self.address, self.port), self.timeout)
        self.raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self.raw


class _PinnedHTTPS(_PinnedHTTP):
    """The same over TLS: SNI and the certificate's hostname check are for the name, not the address."""

    default_port = http.client.HTTPS_PORT

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, address=address, timeout=timeout)
        self.tls = ssl.create_default_context()

    def connect(self) -> None:
        super().connect()
        self.sock = self.tls.wrap_socket(self.raw, server_hostname=self.host)


def _cut(connection: _PinnedHTTP, fired: threading.Event) -> None:
    fired.set()
    if connection.raw is not None:
        try:
            connection.raw.shutdown(socket.SHUT_RDWR)  # a read blocked on it returns at once
        except OSError:
            pass


def post(
    url: str, headers: dict[str, str], body: bytes, *, deadline: float = DEADLINE_SECONDS
) -> tuple[int | None, str]:
    """POST `body` to `url`; returns (status, "") for an answer in 2xx, else (status or None, why in words).

    The status line and headers of the answer must arrive within `deadline` seconds of the start (the lookup
    included); the body is not read. The addresses are tried in turn until one takes the connection.
    """
    ends = time.monotonic() + deadline
    target, refusal = target_check(url)
    if refusal:
        return None, f"refused: {refusal}"
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    clean = {header_value(name): header_value(value) for name, value in headers.items()}
    error = "no answer: no address to connect to"
    for address in target.addresses:
        left = ends - time.monotonic()
        if left <= 0:
            return None, f"no answer within {deadline:g} s"
        connection = kind(target.host, target.port, address=address, timeout=left)
        fired = threading.Event()
        watchdog = threading.Timer(left, _cut, (connection, fired))
        watchdog.daemon = True
        watchdog.start()
        try:
            try:
                connection.connect()
            except OSError as exc:
                error = f"no answer: {address}: {exc}"
                continue  # nothing was sent: the next address may take it
            connection.request("POST", target.path, body=body, headers=clean)
            response = connection.getresponse()
            status, reason = response.status, header_value(response.reason)[:REASON_CHARS]
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if fired.is_set():
                return None, f"no answer within {deadline:g} s (from {address})"
            why = header_value(exc).strip()[:REASON_CHARS]
            return None, f"no valid answer from {address}: {type(exc).__name__}: {why}"
        finally:
            watchdog.cancel()
            connection.close()
        if fired.is_set():
            return None, f"no answer within {deadline:g} s (from {address})"
        return status, "" if 200 <= status < 300 else f"HTTP {status} {reason}"
    return None, error
