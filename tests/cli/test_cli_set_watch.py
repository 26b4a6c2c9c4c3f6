"""`cloudpivot set watch ID`: a progress line until the set ends, and the exit status of `set submit --wait`.

The installed command against a stand-in for the API on loopback (a set's answers, one per look): no CloudPivot
server or worker is needed to see what the command prints.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

SET_ID = "6b1d0c1e-0000-4000-8000-000000000001"


def answers(*steps: tuple[str, dict]) -> list[dict]:
    return [{"id": SET_ID, "state": state, "total": 10, "counts": counts} for state, counts in steps]


@pytest.fixture
def api_stand_in():
    """serve(documents) → the URL of a server answering GET /api/v1/task-sets/{SET_ID} with each in turn (the last
    one again once they run out); `seen` counts the looks."""
    servers = []

    def serve(documents: list[dict]):
        looks = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                if self.path.split("?")[0] != f"/api/v1/task-sets/{SET_ID}":
                    self.send_error(404)
                    return
                body = json.dumps(documents[min(len(looks), len(documents) - 1)]).encode()
                looks.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", looks

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def watch(cli, url: str):
    return cli(
        "set", "watch", SET_ID, "--interval", "0.01", CLOUDPIVOT_URL=url, CLOUDPIVOT_TOKEN="cpt_test", timeout=30
    )


def test_it_prints_a_progress_line_each_time_it_changes_until_the_set_finishes(cli, api_stand_in):
    url, looks = api_stand_in(
        answers(
            ("ACTIVE", {"waiting": 8, "pending": 2}),
            ("ACTIVE", {"waiting": 8, "pending": 2}),  # unchanged: no line
            ("ACTIVE", {"waiting": 4, "running": 3, "succeeded": 3}),
            ("FINISHED", {"succeeded": 10}),
        )
    )
    done = watch(cli, url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[..............................]   0% 0/10 · 8 waiting, 2 pending",
        "[#########.....................]  30% 3/10 · 4 waiting, 3 running, 3 succeeded",
        "[##############################] 100% 10/10 · 10 succeeded · FINISHED",
    ]
    assert f"task set {SET_ID} FINISHED (exit status 0)" in done.stderr
    assert len(looks) == 4


def test_its_exit_status_says_whether_every_element_succeeded(cli, api_stand_in):
    url, _ = api_stand_in(answers(("FINISHED", {"succeeded": 8, "failed": 1, "timed_out": 1})))
    done = watch(cli, url)
    assert done.returncode == 90 and done.stdout.endswith("8 succeeded, 1 failed, 1 timed_out · FINISHED\n")
    url, _ = api_stand_in(answers(("CANCELLED", {"succeeded": 2, "cancelled": 8})))
    assert watch(cli, url).returncode == 81


def test_a_set_that_does_not_exist_is_the_apis_answer(cli, api_stand_in):
    url, _ = api_stand_in(answers(("ACTIVE", {})))
    done = cli("set", "watch", "nope", CLOUDPIVOT_URL=url, CLOUDPIVOT_TOKEN="cpt_test", timeout=30)
    assert done.returncode != 0 and "404" in done.stderr + done.stdout
