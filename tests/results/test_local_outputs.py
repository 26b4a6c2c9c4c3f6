"""Declared outputs of `local` tasks, end to end: a real host agent collects them when the program ends
(succeeded, failed, cancelled), the manifest reaches a real Daphne, and the files download through signed links
after the run directory is gone (docs/data.md)."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request

import pytest

from tasks.models import Attempt, Task
from tasks.services import reconcile_pass, task_cancel
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec

pytestmark = pytest.mark.django_db(transaction=True)

WRITE = (
    "import os, sys\n"
    "os.makedirs('plots/deep', exist_ok=True)\n"
    "open('result.csv', 'w').write('a,b\\n1,2\\n')\n"
    "open('plots/one.png', 'wb').write(bytes(range(256)) * 4096)\n"  # 1 MiB
    "open('plots/deep/two.png', 'wb').write(b'two')\n"
    "open('scratch.tmp', 'w').write('not declared')\n"
)
EXPECTED = {
    "result.csv": b"a,b\n1,2\n",
    "figures/plots/one.png": bytes(range(256)) * 4096,
    "figures/plots/deep/two.png": b"two",
}


def submit(world, code: str, **spec) -> Task:
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["python3", "-c", code], **spec))
    return task


def outputs(live, world, task: Task) -> dict:
    return helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task.pk}/outputs", world.tokens["bob"])


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:  # no token: the link is the permission
        return response.read()


def test_a_succeeded_tasks_outputs_download_with_their_checksums_after_its_run_directory_is_gone(live, world):
    declared = [{"path": "result.csv"}, {"path": "plots", "to": "figures"}]
    task = submit(world, WRITE, outputs=declared)
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason
    attempt = task.attempts.get()
    helpers.wait_for(
        lambda: reconcile_pass() is not None and Attempt.objects.get(pk=attempt.pk).cleanup_state == "done",
        what="cleanup",
    )
    assert not (world.runs_dir / attempt.external_name).exists()  # the run directory is gone, the outputs stay

    body = outputs(live, world, task)
    assert body["state"] == "complete" and body["store"] == "directory", body
    files = {item["name"]: item for item in body["files"]}
    assert set(files) == set(EXPECTED)
    for name, data in EXPECTED.items():
        assert files[name]["bytes"] == len(data) and files[name]["sha256"] == hashlib.sha256(data).hexdigest()
        downloaded = fetch(files[name]["url"])
        assert hashlib.sha256(downloaded).hexdigest() == files[name]["sha256"]
    kinds = [
        e["type"]
        for e in helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task.pk}/events", world.tokens["bob"])["events"]
    ]
    assert kinds.index("outputs") < len(kinds) - 1  # the manifest came before the exit's state change

    tampered = files["result.csv"]["url"].replace("/result.csv", "/plots/one.png")
    with pytest.raises(urllib.error.HTTPError) as refused:
        fetch(tampered)
    assert refused.value.code == 404


def test_a_failed_task_keeps_what_it_wrote_and_says_what_is_missing(live, world):
    code = "import sys\nopen('partial.txt', 'w').write('half')\nsys.exit(3)\n"
    task = submit(world, code, outputs=[{"path": "partial.txt"}, {"path": "final/*.csv"}])
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "FAILED" and task.exit_code == 3  # the outputs change nothing of the outcome
    body = outputs(live, world, task)
    assert body["state"] == "incomplete" and "no file matches" in body["reason"]
    files = {item["name"]: item for item in body["files"]}
    assert files["final/*.csv"]["state"] == "missing"
    assert fetch(files["partial.txt"]["url"]) == b"half"


def test_a_cancelled_tasks_outputs_are_kept_as_far_as_they_exist(live, world):
    code = "import time\nopen('checkpoint.bin', 'wb').write(b'step 1')\nprint('written', flush=True)\ntime.sleep(600)\n"
    task = submit(world, code, outputs=[{"path": "checkpoint.bin"}, {"path": "final.bin"}])
    task = helpers.drive(task, until={"RUNNING"})
    attempt = task.attempts.get()
    stdout = world.runs_dir / attempt.external_name / "stdout"
    helpers.wait_for(lambda: stdout.exists() and b"written" in stdout.read_bytes(), what="the checkpoint")
    task_cancel(task_id=task.pk, user=world.bob)
    task = helpers.drive(task, until={"CANCELLED", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "CANCELLED", task.state_reason
    body = outputs(live, world, task)
    files = {item["name"]: item for item in body["files"]}
    assert body["state"] == "incomplete" and files["final.bin"]["state"] == "missing"
    assert fetch(files["checkpoint.bin"]["url"]) == b"step 1"


def test_a_timed_out_tasks_outputs_are_kept_too(live, world):
    code = "import time\nopen('partial.log', 'w').write('until the deadline')\ntime.sleep(600)\n"
    task = submit(world, code, outputs=[{"path": "*.log"}], timeout_seconds=2)
    task = helpers.drive(task, until={"TIMED_OUT", "FAILED", "CANCELLED", "UNKNOWN"}, timeout=30)
    assert task.state == "TIMED_OUT", task.state_reason
    body = outputs(live, world, task)
    assert body["state"] == "complete", body
    assert fetch(body["files"][0]["url"]) == b"until the deadline"
