"""A busy server answers 503 with Retry-After (cloudpivot/shedding.py); the CLI waits as long as it is told,
then goes on (issue 30, item 3: "prove it"). The web process here works on one request at a time with no
queue, and a request whose body never comes holds that one place, as a slow client would."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def busy_answer(url: str, token: str) -> tuple[int, str]:
    request = urllib.request.Request(url + "/api/v1/tasks", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, ""
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())["code"]


def test_the_cli_waits_for_retry_after_on_a_busy_server_then_answers(cli, world, tmp_path):
    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs")
    env |= {"CLOUDPIVOT_WEB_MAX_IN_FLIGHT": "1", "CLOUDPIVOT_WEB_MAX_QUEUED": "0"}
    process = helpers.start_daphne(port=port, env=env, log=tmp_path / "web.log")
    url, token = f"http://127.0.0.1:{port}", world.tokens["bob"]
    slow = socket.create_connection(("127.0.0.1", port))
    try:
        head = f"POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        slow.sendall((head + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n").encode())
        assert helpers.wait_for(lambda: busy_answer(url, token) == (503, "overloaded"), what="the one place held")

        started = time.monotonic()
        listing = cli.start("task", "list", "-o", "json", CLOUDPIVOT_URL=url, CLOUDPIVOT_TOKEN=token)
        time.sleep(1.0)
        slow.close()  # the place is free again; the CLI asks again only when Retry-After (2 s) has passed
        out, err = listing.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        slow.close()
        helpers.stop_process_group(process)
    assert listing.returncode == 0, err
    assert json.loads(out) == []
    assert "the server is busy: try again in 2 s; retrying in 2 s" in err
    assert took >= 2.0  # its own backoff would have asked again after 0.25 s
