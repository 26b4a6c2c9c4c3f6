"""The host program (a real process, the zipapp a VM runs) meeting a server that refuses it: a result the server
will never take is replaced by words and the attempt still ends, and a redirect is never followed with the
credential."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec as local_spec
from tests.runner_api.support import with_vm_host
from tests.vm_host import host_program

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NUL_RESULT = (
    "import json, os\n"
    "json.dump({'summary': {'text': 'a\\u0000b'}}, open(os.environ['CLOUDPIVOT_RESULT_FILE'], 'w'))\n"
    "print('done')\n"
)


@pytest.fixture
def world(world, tmp_path, monkeypatch):
    return with_vm_host(world, tmp_path, monkeypatch)


def test_a_result_the_server_refuses_is_recorded_once_and_the_task_still_ends(server, world):
    document = local_spec(command=["python3", "-c", NUL_RESULT]) | {"cloud": "vm-host"}
    task, _ = task_submit(user=world.bob, document=document)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=40)
    assert task.state == "SUCCEEDED", task.state_reason
    assert task.result in (None, {})  # the refused result is not stored
    [refusal] = task.events.filter(type="progress").values_list("message", flat=True)
    assert refusal.startswith("the server refused the result event: data: a text holds a NUL character"), refusal
    assert task.attempts.get().acked_seq == 3  # started, the stand-in for the result, exited: each once


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with `reply(handler)` and remembers each request's path and headers."""

    seen: list
    reply = None

    def handle_any(self) -> None:
        self.seen.append((self.command, self.path, dict(self.headers)))
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).reply(self)

    do_GET = do_POST = handle_any

    def log_message(self, *args) -> None:
        pass


def serve(reply) -> tuple[http.server.ThreadingHTTPServer, list]:
    seen: list = []
    handler = type("Handler", (Recorder,), {"seen": seen, "reply": staticmethod(reply)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def test_the_host_program_never_follows_a_redirect_with_its_credential(tmp_path: Path):
    def elsewhere_reply(handler):
        body = json.dumps({"argv": ["true"], "acked_seq": 0}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    elsewhere, stolen = serve(elsewhere_reply)
    target = f"http://127.0.0.1:{elsewhere.server_address[1]}"

    def redirect_reply(handler):
        handler.send_response(302)
        handler.send_header("Location", target + handler.path)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    redirector, asked = serve(redirect_reply)
    credential = tmp_path / "credential"
    credential.write_text("cpr_secret-that-must-not-travel\n")
    credential.chmod(0o600)
    runner = subprocess.Popen(
        [
            sys.executable,
            str(host_program(tmp_path)),
            "--server-url",
            f"http://127.0.0.1:{redirector.server_address[1]}",
            "--credential-file",
            str(credential),
            "--state-dir",
            str(tmp_path / "state"),
            "--name",
            "vm-test",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        helpers.wait_for(
            lambda: len(asked) >= 2, timeout=20, what="the host program to ask the redirecting server twice"
        )
        time.sleep(0.5)
    finally:
        runner.terminate()
        output = runner.communicate(timeout=10)[0]
        redirector.shutdown()
        elsewhere.shutdown()
    assert asked[0][2].get("Authorization") == "Bearer cpr_secret-that-must-not-travel"  # it did try the server
    assert stolen == [], stolen  # the other port never heard from it, let alone saw the credential
    assert "redirects are never followed" in output, output
    assert "cpr_secret" not in output


def test_the_host_agent_goes_on_when_one_programs_result_cannot_be_stored(live, world):
    """`local`: the agent reports every attempt in one request; one bad result must not block the others."""
    from tasks.models import Task

    bad, _ = task_submit(user=world.bob, document=local_spec(command=["python3", "-c", NUL_RESULT]))
    good, _ = task_submit(user=world.bob, document=local_spec(command=["python3", "-c", "print('fine')"]))
    for task in (bad, good):
        task = helpers.drive(Task.objects.get(pk=task.pk), {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=40)
        assert task.state == "SUCCEEDED", task.state_reason
    bad.refresh_from_db()
    assert bad.result in (None, {})
    [refusal] = bad.events.filter(type="progress").values_list("message", flat=True)
    assert refusal.startswith("the server refused the result event: data: a text holds a NUL character")
