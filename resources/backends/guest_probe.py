"""Is the guest up, not just its hypervisor? Two looks from the control plane that need no guest agent:

- cloud-init's last words on the serial console: every boot its final stage prints
  "Cloud-init v. <version> finished at <time>. Datasource <…>.  Up <n> seconds" (cc_final_message, on the
  console through cloud-final.service). The console log keeps earlier boots' lines, so a marker counts only if
  it differs from the last one seen before this boot was asked for (its time and uptime make each boot's unique).
- an SSH server's identification line (RFC 4253 §4.2: "SSH-2.0-<software>", maybe after other lines), read from a
  plain TCP connection with a short timeout; nothing is sent, so no login is tried and no key is needed.

Nothing here touches the ORM or a cloud API.
"""

from __future__ import annotations

import re
import socket
import time

from django.conf import settings

CLOUD_INIT_FINISHED = re.compile(r"Cloud-init v\. \S+ finished at [^\r\n]*")
BASELINE_UNREAD = "(the console log could not be read before this boot)"
_BANNER_BYTES = 1024


def probe_seconds() -> float:
    return float(getattr(settings, "INSTANCE_READY_PROBE_SECONDS", 2))


def last_boot_marker(console: str) -> str:
    """The last "Cloud-init v. … finished at …" line in a console log ("" if there is none)."""
    found = CLOUD_INIT_FINISHED.findall(console or "")
    return found[-1].strip() if found else ""


def ssh_banner(host: str, port: int, timeout: float | None = None) -> str:
    """The identification line of the SSH server at host:port ("SSH-2.0-OpenSSH_9.6"), or "" when nothing
    answers, something else answers, or it says nothing within the timeout."""
    timeout = probe_seconds() if timeout is None else timeout
    ends = time.monotonic() + timeout
    received = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            while len(received) < _BANNER_BYTES:
                line = _identification(received)
                if line:
                    return line
                left = ends - time.monotonic()
                if left <= 0:
                    break
                sock.settimeout(left)
                chunk = sock.recv(256)
                if not chunk:
                    break
                received += chunk
    except OSError:
        return ""
    return _identification(received)


def _identification(received: bytes) -> str:
    """The first complete line starting "SSH-2.0-" (or "SSH-1.99-", a server that also speaks 2.0)."""
    for line in received.split(b"\n")[:-1]:  # only complete lines
        line = line.rstrip(b"\r")
        if line.startswith((b"SSH-2.0-", b"SSH-1.99-")):
            return line.decode("ascii", "replace")[:255]
    return ""
