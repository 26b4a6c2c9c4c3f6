"""`SlowProxy`: a TCP proxy on 127.0.0.1 in front of a loopback API server that holds chosen requests back.

A cloud that answers slowly (a create that takes 20 s, an API server that hangs until the client's
timeout) played for real: the client under test talks HTTP through it, and each request the `slow`
predicate picks (by method and path) is passed on `delay` seconds late. `delay` may be changed while
it runs (a cloud that recovers). It counts the requests it is holding back at once (`most_held`): the
client under test never sends two at a time unless two of its callers ask at once.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

METHODS = {b"GET", b"POST", b"PUT", b"PATCH", b"DELETE", b"HEAD", b"OPTIONS"}


def every_request(method: str, path: str) -> bool:
    return True


class SlowProxy:
    def __init__(self, target: str, delay: float, slow: Callable[[str, str], bool] = every_request) -> None:
        parts = urlsplit(target)
        self.target, self.delay, self.slow = (parts.hostname, parts.port), delay, slow
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request seen, in order
        self.held = 0  # requests being held back now
        self.most_held = 0
        self._lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name="slow-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        """Client to server. The server is dialled once the first request was held back, not before: a
        server that drops a connection idle a few seconds (uWSGI, Nova's API here) must not see one wait."""
        upstream: socket.socket | None = None
        try:
            while data := client.recv(65536):
                method, _, rest = data.split(b"\r\n", 1)[0].partition(b" ")
                if method in METHODS:
                    path = rest.split(b" ")[0].split(b"?")[0].decode(errors="replace")
                    with self._lock:
                        self.requests.append((method.decode(), path))
                    if self.slow(method.decode(), path):
                        self._hold()
                if upstream is None:
                    upstream = socket.create_connection(self.target)
                    threading.Thread(target=self._back, args=(upstream, client), daemon=True).start()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    @staticmethod
    def _back(upstream: socket.socket, client: socket.socket) -> None:
        """Server to client, as it comes."""
        try:
            while data := upstream.recv(65536):
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(upstream, client)

    def _hold(self) -> None:
        with self._lock:
            self.held += 1
            self.most_held = max(self.most_held, self.held)
        try:
            time.sleep(self.delay)
        finally:
            with self._lock:
                self.held -= 1

    def close(self) -> None:
        self.listener.close()


def job_creates(method: str, path: str) -> bool:
    """Only `POST …/jobs`: a cloud whose creates are slow and whose reads are not."""
    return method == "POST" and path.endswith("/jobs")


def _close(*ends: socket.socket | None) -> None:
    for end in ends:
        if end is None:
            continue
        try:
            end.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
