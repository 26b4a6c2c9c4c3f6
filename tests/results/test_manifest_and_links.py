"""The `outputs` event recorded as a manifest, the outputs API and its signed links (docs/data.md, docs/api.md).

The Runner's side is played over the real Runner API (v1 events); the files are put where the directory
store keeps them, as the host agent would have copied them."""

from __future__ import annotations

import hashlib

import pytest
from django.core import signing
from django.db import transaction
from rest_framework.test import APIClient

from results.models import OutputFile, OutputManifest
from tasks.models import Attempt, Task
from tasks.services.attempts import attempt_create
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import hello_spec, v1_runner_client

DECLARED = [{"path": "result.csv"}, {"path": "plots/*.png"}]


@pytest.fixture
def results_dir(settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    return settings.RESULTS_DIR


def attempt_of(user, **spec) -> Attempt:
    task, _ = task_submit(user=user, document=hello_spec(outputs=DECLARED, **spec))
    with transaction.atomic():
        return attempt_create(task=task_lock(task.pk), reason="test")


runner = v1_runner_client  # these attempts speak protocol v1, as a VM booted before its retirement


def ev(seq, type, **data):
    return {"seq": seq, "type": type, "time": "2026-11-30T12:00:00Z", "data": data}


def store(results_dir, attempt: Attempt, name: str, data: bytes) -> dict:
    path = results_dir / attempt.external_name / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "ref": name}


def finish_with_outputs(attempt: Attempt, files: list[dict], missing: list[dict], exit_code: int = 0) -> None:
    manifest = {"files": files, "missing": missing, "complete": not missing, "reason": "1 not kept" if missing else ""}
    client = runner(attempt)
    batch = [ev(1, "started", pid=10), ev(2, "outputs", **manifest), ev(3, "exited", exit_code=exit_code)]
    response = client.post("/runner/v1/events", {"events": batch}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["acked_seq"] == 3


def test_the_assignment_names_the_declared_outputs_and_the_directory_store(world, results_dir):
    attempt = attempt_of(world.bob)
    body = runner(attempt).get("/runner/v1/assignment").json()
    assert body["outputs"] == {
        "declared": DECLARED,
        "store": {"kind": "directory", "path": str(results_dir / attempt.external_name)},
    }
    plain, _ = task_submit(user=world.bob, document=hello_spec())
    with transaction.atomic():
        other = attempt_create(task=task_lock(plain.pk), reason="test")
    assert "outputs" not in runner(other).get("/runner/v1/assignment").json()


def test_a_reported_manifest_is_kept_with_its_checksums_and_downloads_through_a_signed_link(api, world, results_dir):
    attempt = attempt_of(world.bob, retry_limit=0)
    csv = store(results_dir, attempt, "result.csv", b"a,b\n1,2\n")
    png = store(results_dir, attempt, "plots/one.png", b"\x89PNG fake")
    finish_with_outputs(attempt, [csv, png], [])
    task = Task.objects.get(pk=attempt.task_id)
    assert task.state == "SUCCEEDED"
    assert OutputManifest.objects.get(attempt=attempt).state == "complete"
    history = list(task.events.filter(type="outputs").values_list("message", flat=True))
    assert history == ["2 outputs kept (17 bytes)"]

    body = api("rita").get(f"/api/v1/tasks/{task.pk}/outputs").json()  # a reader of the project may read them
    assert body["attempt"] == 1 and body["state"] == "complete" and body["store"] == "directory"
    files = {item["name"]: item for item in body["files"]}
    assert files["result.csv"]["sha256"] == csv["sha256"] and files["result.csv"]["bytes"] == 8
    url = files["plots/one.png"]["url"]
    assert url.startswith("http://testserver/results/outputs/") and url.endswith("/plots/one.png")
    response = APIClient().get(url.removeprefix("http://testserver"))  # the link is the permission: no login
    assert response.status_code == 200
    data = b"".join(response.streaming_content)
    assert data == b"\x89PNG fake" and hashlib.sha256(data).hexdigest() == png["sha256"]
    assert response["Content-Disposition"] == 'attachment; filename="one.png"'
    assert response["X-Checksum-SHA256"] == png["sha256"]


def test_a_failed_program_keeps_what_exists_and_says_what_is_missing(api, world, results_dir):
    attempt = attempt_of(world.bob)
    csv = store(results_dir, attempt, "result.csv", b"partial")
    finish_with_outputs(attempt, [csv], [{"name": "plots/*.png", "reason": "no file matches it"}], exit_code=2)
    task = Task.objects.get(pk=attempt.task_id)
    assert task.state == "FAILED" and task.exit_code == 2  # the outputs changed nothing of the outcome
    body = api("bob").get(f"/api/v1/tasks/{task.pk}/outputs").json()
    assert body["state"] == "incomplete" and body["reason"] == "1 not kept"
    assert [(f["name"], f["state"], f["reason"]) for f in body["files"]] == [
        ("plots/*.png", "missing", "no file matches it"),
        ("result.csv", "stored", ""),
    ]
    assert "url" not in body["files"][0] and "url" in body["files"][1]


def test_a_foreign_task_outputs_are_a_404(api, world, results_dir):
    attempt = attempt_of(world.bob)
    response = api("charlie").get(f"/api/v1/tasks/{attempt.task_id}/outputs")
    assert response.status_code == 404
    assert APIClient().get(f"/api/v1/tasks/{attempt.task_id}/outputs").status_code == 401


def test_a_running_attempt_outputs_are_pending(api, world, results_dir):
    attempt = attempt_of(world.bob)
    body = api("bob").get(f"/api/v1/tasks/{attempt.task_id}/outputs").json()
    assert body["state"] == "pending" and body["files"] == [] and body["declared"] == DECLARED
    assert api("bob").get(f"/api/v1/tasks/{attempt.task_id}/outputs?attempt=9").status_code == 404


def test_an_expired_or_altered_link_is_refused_and_a_removed_output_is_gone(api, world, results_dir, settings):
    attempt = attempt_of(world.bob)
    finish_with_outputs(attempt, [store(results_dir, attempt, "result.csv", b"x")], [])
    url = api("bob").get(f"/api/v1/tasks/{attempt.task_id}/outputs").json()["files"][0]["url"]
    path = url.removeprefix("http://testserver")
    token = path.split("/")[3]
    client = APIClient()

    altered = path.replace(token, token[:-1] + ("A" if token[-1] != "A" else "B"))
    response = client.get(altered)
    assert response.status_code == 403 and "not a valid download link" in response.json()["message"]

    other = signing.TimestampSigner(salt="something else").sign_object({"f": 1, "a": attempt.pk})
    assert client.get(path.replace(token, other)).status_code == 403
    assert client.get(path.replace("result.csv", "other.csv")).status_code == 404

    settings.RESULTS_LINK_SECONDS = -1  # every link minted so far is older than that
    response = client.get(path)
    assert response.status_code == 403 and response.json()["code"] == "link_expired"
    assert "expired" in response.json()["message"]

    settings.RESULTS_LINK_SECONDS = 3600
    (results_dir / attempt.external_name / "result.csv").unlink()
    response = client.get(path)
    assert response.status_code == 404 and "no longer" in response.json()["message"]
    OutputFile.objects.all().delete()
    assert client.get(path).status_code == 404


def test_the_task_page_shows_the_results_with_links_and_checksums(pages, world, results_dir):
    attempt = attempt_of(world.bob)
    csv = store(results_dir, attempt, "result.csv", b"a,b\n")
    finish_with_outputs(attempt, [csv], [{"name": "plots/*.png", "reason": "no file matches it"}], exit_code=1)
    html = pages("bob").get(f"/tasks/{attempt.task_id}/").content.decode()
    assert 'id="task-outputs"' in html and "Results" in html
    assert csv["sha256"] in html and "missing: no file matches it" in html
    link = html.split('data-output="result.csv"')[0].rsplit('href="', 1)[1].split('"')[0]
    response = APIClient().get(link)
    assert response.status_code == 200 and b"".join(response.streaming_content) == b"a,b\n"
    panels = pages("bob").get(f"/tasks/{attempt.task_id}/panels/").content.decode()
    assert 'id="task-outputs"' in panels
    plain, _ = task_submit(user=world.bob, document=hello_spec())
    assert 'id="task-outputs"' not in pages("bob").get(f"/tasks/{plain.pk}/").content.decode()


def test_retention_removes_the_stored_outputs_with_their_task_and_archives_the_manifest(world, results_dir, settings):
    import datetime as dt

    from django.utils import timezone

    from cloudpivot import retention

    settings.RETENTION_TASK_DAYS = 1
    settings.RETENTION_ARCHIVE_DIR = results_dir.parent / "archive"
    attempt = attempt_of(world.bob)
    finish_with_outputs(attempt, [store(results_dir, attempt, "result.csv", b"old")], [])
    Attempt.objects.filter(pk=attempt.pk).update(cleanup_state="done")
    kept = attempt_of(world.bob)  # still running: its outputs stay
    later = timezone.now() + dt.timedelta(days=3)
    assert retention.prune(now=later)["tasks"] == 1
    assert not (results_dir / attempt.external_name).exists()
    assert not OutputFile.objects.filter(attempt_id=attempt.pk).exists()
    assert Attempt.objects.filter(pk=kept.pk).exists()
    [record] = retention.read_archive(retention.archive_path("tasks", later))
    assert [(o["name"], o["sha256"]) for o in record["outputs"]] == [("result.csv", hashlib.sha256(b"old").hexdigest())]
