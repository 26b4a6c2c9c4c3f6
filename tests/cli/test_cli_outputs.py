"""`cloudpivot task outputs ID [--download DIR]` against a real server and a real `local` task: the listing,
the download with every SHA-256 checked, and a file changed in the store refused (docs/cli.md)."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.conf import settings

from tasks.models import Task
from tests.cli.support import spec_file

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PROGRAM = (
    "import os\nos.makedirs('out', exist_ok=True)\n"
    "open('out/a.txt', 'w').write('alpha')\nopen('b.bin', 'wb').write(os.urandom(70000))\n"
)


def test_outputs_are_listed_then_downloaded_and_every_checksum_verified(logged_in, worker, tmp_path):
    document = {
        "cloud": "local",
        "command": ["python3", "-c", PROGRAM],
        "outputs": [{"path": "out"}, {"path": "*.bin"}],
    }
    spec = spec_file(tmp_path, "spec.json", json.dumps(document))
    done = logged_in("task", "submit", "-f", str(spec), "--wait", timeout=180)
    assert done.returncode == 0, done.stderr
    task_id = done.stderr.split()[1]  # "task <id> SUCCEEDED"

    listing = logged_in("task", "outputs", task_id)
    assert listing.returncode == 0, listing.stderr
    assert "out/a.txt" in listing.stdout and "b.bin" in listing.stdout
    assert hashlib.sha256(b"alpha").hexdigest() in listing.stdout

    target = tmp_path / "fetched"
    fetched = logged_in("task", "outputs", task_id, "--download", str(target))
    assert fetched.returncode == 0, fetched.stderr
    assert (target / "out" / "a.txt").read_bytes() == b"alpha"
    manifest = logged_in.json("task", "outputs", task_id)
    for item in manifest["files"]:
        assert hashlib.sha256((target / item["name"]).read_bytes()).hexdigest() == item["sha256"]
        assert f"{item['sha256']}  {target / item['name']}" in fetched.stdout

    # A byte changed in the store after the manifest: the download says so and leaves nothing behind.
    attempt = Task.objects.get(pk=task_id).attempts.get()
    stored = settings.RESULTS_DIR / attempt.external_name / "out" / "a.txt"
    stored.write_bytes(b"alphA")
    again = tmp_path / "again"
    refused = logged_in("task", "outputs", task_id, "--download", str(again))
    assert refused.returncode == 91, refused.stderr
    assert "out/a.txt" in refused.stderr and "is not the manifest's" in refused.stderr
    assert not (again / "out" / "a.txt").exists() and (again / "b.bin").exists()
