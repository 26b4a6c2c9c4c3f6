"""The manifest goes through the host agent's on-disk outbox: a server outage and an agent killed while it
waits lose nothing (docs/data.md, docs/runner.md)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
import urllib.request

import pytest

from results.models import OutputFile
from tasks.services import reconcile_pass
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PROGRAM = (
    "import os, time\n"
    "open('model.bin', 'wb').write(b'weights' * 1000)\n"
    "print('written', flush=True)\n"
    "while not os.path.exists({go!r}):\n"
    "    time.sleep(0.05)\n"
)


def test_the_manifest_survives_a_server_outage_and_an_agent_restart(server, world, tmp_path):
    go = tmp_path / "go"
    code = PROGRAM.format(go=str(go))
    task, _ = task_submit(
        user=world.bob, document=hello_spec(command=["python3", "-c", code], outputs=[{"path": "*.bin"}])
    )
    task = helpers.drive(task, {"RUNNING"}, timeout=20)
    attempt = task.attempts.get()
    directory = world.runs_dir / attempt.external_name
    helpers.wait_for(lambda: b"written" in (directory / "stdout").read_bytes(), what="the output written")

    server.stop()
    go.touch()  # the program ends while nobody can hear: the manifest waits in the outbox
    outbox = directory / "events.json"
    helpers.wait_for(
        lambda: outbox.exists() and "outputs" in [e["type"] for e in json.loads(outbox.read_text())["pending"]],
        what="the outputs event in the outbox",
    )
    os.kill(int((world.runs_dir / "agent.lock").read_text()), signal.SIGKILL)  # the next agent sends it from disk
    started = time.monotonic()
    while time.monotonic() - started < 20:
        reconcile_pass()  # a worker goes on meanwhile (and starts a new agent)
        time.sleep(0.5)
    server.start()

    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=60)
    assert task.state == "SUCCEEDED", task.state_reason
    [stored] = OutputFile.objects.filter(attempt=attempt)
    assert stored.name == "model.bin" and stored.sha256 == hashlib.sha256(b"weights" * 1000).hexdigest()
    assert list(task.events.filter(type="outputs").values_list("message", flat=True)) == ["1 output kept (7000 bytes)"]
    body = helpers.api_call(server.url, "GET", f"/api/v1/tasks/{task.pk}/outputs", world.tokens["bob"])
    with urllib.request.urlopen(body["files"][0]["url"], timeout=10) as response:
        assert hashlib.sha256(response.read()).hexdigest() == stored.sha256
