"""Bodies are refused before they are read (issue 34, item 6): a real web process, raw HTTP on a socket."""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests import helpers
from tests.builders import hello_spec

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def web(tmp_path):
    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs")
    env["CLOUDPIVOT_RUNNER_MAX_REQUEST_BYTES"] = "1000"
    process = helpers.start_daphne(port=port, env=env, log=tmp_path / "web.log")
    yield port
    helpers.stop_process_group(process)


def answer(sock: socket.socket) -> tuple[int, dict, dict]:
    """Status, headers and JSON body of the one answer on the socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, json.loads(body)


def send_head(port: int, path: str, token: str, extra: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n{extra}\r\n".encode())
    return sock


def test_a_declared_length_over_the_limit_is_refused_before_a_byte_is_sent(web, world):
    started = time.monotonic()
    with send_head(web, "/api/v1/tasks", world.tokens["bob"], "Content-Length: 1000000000\r\n") as sock:
        status, headers, body = answer(sock)  # no byte of the body was sent, and none is waited for
    assert time.monotonic() - started < 5
    assert (status, body["code"], headers["connection"]) == (413, "request_too_large", "close")
    assert body["message"] == "the request body is 1000000000 bytes; at most 2621440 are accepted here"


def test_the_runner_apis_limit_is_the_one_the_environment_sets(web, world):
    with send_head(web, "/runner/v2/sync", "cpa_whatever", "Content-Length: 1001\r\n") as sock:
        status, _, body = answer(sock)
    assert status == 413 and body["message"].endswith("at most 1000 are accepted here")


def test_a_chunked_body_is_cut_off_once_past_the_limit(web, world):
    chunk = b"x" * 65536
    with send_head(web, "/api/v1/tasks", world.tokens["bob"], "Transfer-Encoding: chunked\r\n") as sock:
        sent = 0
        try:
            while sent < 8 * 1024 * 1024:  # more than 3 × the limit: the server stops taking it
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, _, body = answer(sock)
    assert status == 413 and body["message"] == (
        "the request body is over 2621440 bytes (sent without a length); at most 2621440 are accepted here"
    )


def test_a_body_within_the_limit_goes_through(web, world):
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{web}/api/v1/tasks",
        data=json.dumps(hello_spec()).encode(),
        headers={"Authorization": f"Bearer {world.tokens['bob']}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        assert response.status == 201
