"""Servers the notification tests talk to over real sockets on loopback: an SMTP server (aiosmtpd, its own
process), the signed-webhook receiver (webhook_receiver.py, its own process; `received` reads what it got,
`pump_until` delivers to it as the pump job does) and hostile webhook receivers (threads of the test process,
each a plain TCP server that answers what no HTTP server should)."""

from __future__ import annotations

import json
import mailbox
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests import helpers

RECEIVER = Path(__file__).with_name("webhook_receiver.py")


@contextmanager
def smtp_server(settings, maildir: Path) -> Iterator[Callable[[], list[mailbox.MaildirMessage]]]:
    """A real SMTP server that stores what it gets in `maildir`; Django sends to it. Yields a reader."""
    port = helpers.free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{port}", "-c", "aiosmtpd.handlers.Mailbox"]
        + [str(maildir)],
        start_new_session=True,
    )
    try:
        helpers.wait_for(lambda: answers(port), timeout=15, what="the SMTP server to listen")
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
        yield lambda: list(mailbox.Maildir(str(maildir), create=False)) if maildir.exists() else []
    finally:
        helpers.stop_process_group(process)


def answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def mail_times(maildir: Path) -> list[float]:
    """When each stored mail was written (its file's mtime, in time.time() seconds)."""
    return [path.stat().st_mtime for path in (maildir / "new").glob("*")] if (maildir / "new").exists() else []


def start_receiver(port: int, secret: str, log: Path) -> subprocess.Popen:
    """The signed-webhook receiver process on 127.0.0.1:`port`, checking signatures with `secret`, logging to `log`."""
    process = subprocess.Popen([sys.executable, str(RECEIVER), str(port), secret, str(log)], start_new_session=True)
    helpers.wait_for(lambda: answers(port), timeout=10, what="the receiver to listen")
    return process


def received(log: Path) -> list[dict]:
    """What the receiver logged, one dict a request (see webhook_receiver.py)."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def pump_until(condition: Callable[[], object], *, timeout: float = 30) -> None:
    """Run the notifications pump, as its job does, until `condition()` holds; fail at the deadline."""
    from notifications import jobs

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "deliveries did not arrive in time"
        jobs.pump(seconds=0.5)


HOSTILE_KINDS = ("garbage status line", "oversized headers", "trickled status line")


class HostileReceiver:
    """A TCP server on 127.0.0.1 that reads a request and answers it in one of HOSTILE_KINDS:

    - garbage status line: `SPAM SPAM SPAM` where `HTTP/1.1 200 OK` belongs, then closes;
    - oversized headers: a valid status line, then one header line of 100 kB;
    - trickled status line: `HTTP/1.1 204 No Content…`, one byte a second, for as long as the client listens.
    """

    def __init__(self, kind: str) -> None:
        assert kind in HOSTILE_KINDS
        self.kind = kind
        self.requests = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self.stopping.set()
        self.listener.close()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            seen = b""
            try:
                while b"\r\n\r\n" not in seen:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    seen += chunk
                self.requests += 1
                if self.kind == "garbage status line":
                    conn.sendall(b"SPAM SPAM SPAM\r\n\r\n")
                elif self.kind == "oversized headers":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 100_000 + b"\r\n\r\n")
                else:
                    line = b"HTTP/1.1 204 No Content" + b" and then some" * 1000
                    for byte in line:
                        if self.stopping.wait(1):
                            return
                        conn.sendall(bytes([byte]))
            except OSError:
                return


def tls_files(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A certificate authority and a server certificate for `name` signed by it: (ca.pem, cert.pem, key.pem)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)

    def made(subject: str, key, issuer: str, signer, *, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = made("CloudPivot test CA", ca_key, "CloudPivot test CA", ca_key, ca=True)
    cert = made(name, key, "CloudPivot test CA", ca_key, ca=False)
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


class TLSReceiver:
    """An https server on 127.0.0.1 answering 204 to every POST; it notes the SNI name and Host of each."""

    def __init__(self, cert: Path, key: Path) -> None:
        import ssl
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.seen: list[tuple[str | None, str]] = []
        names: list[str | None] = []
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.sni_callback = lambda sock, name, ctx: names.append(name)
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                seen.append((names[-1] if names else None, self.headers["Host"]))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
