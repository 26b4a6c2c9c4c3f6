"""A `local` task's data reference end to end: a real host agent runs a program that finds an allowed directory
in CLOUDPIVOT_DATA_<N> and CLOUDPIVOT_DATA_<NAME>, reads a file there and declares what it wrote as an output;
the attempt's record of what it borrowed is written when it is handed out and released when it ends, and the API
and the task page show it (docs/data.md)."""

from __future__ import annotations

import os
import urllib.error
import urllib.request

import pytest

from results.models import StorageReference
from tasks.models import Task
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec

pytestmark = pytest.mark.django_db(transaction=True)

READ = (
    "import os\n"
    "first = open(os.path.join(os.environ['CLOUDPIVOT_DATA_0'], 'train.csv')).read()\n"
    "named = open(os.path.join(os.environ['CLOUDPIVOT_DATA_TRAIN'], 'train.csv')).read()\n"
    "assert first == named\n"
    "open('copy.csv', 'w').write(first.upper())\n"
)


def test_a_local_task_reads_an_allowed_directory_and_the_attempt_records_what_it_borrowed(live, world, pages, tmp_path):
    root = tmp_path / "datasets"
    (root / "mnist").mkdir(parents=True)
    (root / "mnist" / "train.csv").write_text("a,b\n1,2\n")
    (root / "link").symlink_to(root / "mnist")  # inside, through a link: kept resolved
    world.local.options = {**world.local.options, "data_roots": [str(root)]}
    world.local.save(update_fields=["options"])

    document = hello_spec(
        command=["python3", "-c", READ],
        data=[{"kind": "dir", "ref": str(root / "link"), "name": "train"}],
        outputs=[{"path": "copy.csv"}],
    )
    task, _ = task_submit(user=world.bob, document=document)
    assert task.normalized["data"][0]["ref"] == os.path.realpath(root / "mnist")
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason

    body = helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task.pk}/outputs", world.tokens["bob"])
    (copied,) = body["files"]
    with urllib.request.urlopen(copied["url"], timeout=10) as response:
        assert response.read() == b"A,B\n1,2\n"

    attempt = task.attempts.get()
    (row,) = StorageReference.objects.all()
    assert (row.attempt_id, row.attempt_name, row.connection_id) == (attempt.pk, attempt.external_name, world.local.pk)
    assert (row.project_id, row.owner_id) == (world.alpha.pk, world.bob.pk)
    assert (row.index, row.kind, row.ref, row.name, row.mode) == (
        0,
        "dir",
        os.path.realpath(root / "mnist"),
        "train",
        "ro",
    )
    assert (row.role, row.state) == ("borrowed", "released") and row.released_at >= row.created_at

    attempts = helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task.pk}/attempts", world.tokens["bob"])
    (storage,) = attempts["attempts"][0]["storage"]
    assert {k: storage[k] for k in ("index", "kind", "ref", "role", "state")} == {
        "index": 0,
        "kind": "dir",
        "ref": os.path.realpath(root / "mnist"),
        "role": "borrowed",
        "state": "released",
    }

    page = pages("bob").get(f"/tasks/{task.pk}/").content.decode()
    assert 'id="task-data"' in page and "CLOUDPIVOT_DATA_TRAIN" in page and "borrowed" in page
    assert os.path.realpath(root / "mnist") in page
    assert pages("charlie").get(f"/tasks/{task.pk}/").status_code == 404
    with pytest.raises(urllib.error.HTTPError) as foreign:
        helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task.pk}/attempts", world.tokens["charlie"])
    assert foreign.value.code == 404


def test_a_task_without_data_records_nothing(live, world):
    task, _ = task_submit(user=world.bob, document=hello_spec())
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED" and not StorageReference.objects.exists()
    assert Task.objects.count() == 1
