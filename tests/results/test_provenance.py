"""The signed provenance bundle of an attempt and the installation's public key (docs/data.md, "Provenance").

The Runner's side is played over the real Runner API (v1 events, as a VM's Runner); the files are put where the
directory store keeps them. Verification uses `cryptography` directly, as someone outside CloudPivot would."""

from __future__ import annotations

import base64
import hashlib
import json
import platform
import stat
import threading

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from clusters.backends.base import AttemptRef
from clusters.backends.kubernetes.labels import CONTAINER
from clusters.backends.kubernetes.observation import observe_attempt
from results import provenance_key
from results.provenance import provenance_bundle
from tasks.models import Attempt, TaskEvent
from tasks.services.attempts import attempt_create
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec, v1_runner_client

HOST = {"agent_version": "2.0", "kernel": "6.1.0-test", "cpu_model": "Test CPU @ 3 GHz", "boot_id": "b" * 36}


@pytest.fixture
def key_file(settings, tmp_path):
    settings.PROVENANCE_KEY_FILE = tmp_path / "keys" / "provenance-ed25519.pem"
    settings.RESULTS_DIR = tmp_path / "results"
    return settings.PROVENANCE_KEY_FILE


def finished_attempt(user, results_dir, *, exit_code: int = 0) -> Attempt:
    document = hello_spec(outputs=[{"path": "result.csv"}], retry_limit=0, env={"GREETING": "grüß dich"})
    task, _ = task_submit(user=user, document=document)
    with transaction.atomic():
        attempt = attempt_create(task=task_lock(task.pk), reason="test")
    data = b"a,b\n1,2\n"
    (results_dir / attempt.external_name).mkdir(parents=True)
    (results_dir / attempt.external_name / "result.csv").write_bytes(data)
    manifest = {
        "files": [{"name": "result.csv", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "ref": "x"}],
        "complete": True,
    }
    batch = [
        {"seq": 1, "type": "started", "time": "2026-11-30T12:00:00Z", "data": {"pid": 10, "host": HOST}},
        {"seq": 2, "type": "outputs", "time": "2026-11-30T12:00:05Z", "data": manifest},
        {"seq": 3, "type": "exited", "time": "2026-11-30T12:00:06Z", "data": {"exit_code": exit_code}},
    ]
    response = v1_runner_client(attempt).post("/runner/v1/events", {"events": batch}, format="json")
    assert response.status_code == 200, response.json()
    attempt.refresh_from_db()
    return attempt


def canonical(bundle: dict) -> bytes:
    return json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def verifies(document: dict, pem: str) -> bool:
    try:
        load_pem_public_key(pem.encode()).verify(
            base64.b64decode(document["signature"]["value"]), canonical(document["bundle"])
        )
    except InvalidSignature:
        return False
    return True


def test_a_finished_attempts_bundle_says_what_ran_and_verifies_with_the_served_key(api, world, key_file):
    attempt = finished_attempt(world.bob, key_file.parent.parent / "results", exit_code=3)
    response = api("rita").get(f"/api/v1/tasks/{attempt.task_id}/provenance")  # a reader may read it
    assert response.status_code == 200, response.json()
    document = response.json()
    bundle = document["bundle"]
    task = attempt.task
    assert bundle["format"] == "cloudpivot-provenance/1"
    assert bundle["task"]["id"] == str(task.pk) and bundle["task"]["cloud"] == "local"
    assert bundle["document"]["sha256"] == task.spec_sha256 == hashlib.sha256(canonical(task.spec)).hexdigest()
    assert bundle["spec"] == task.normalized and bundle["spec"]["env"]["GREETING"] == "grüß dich"
    assert bundle["attempt"]["number"] == 1
    assert bundle["attempt"]["exit_code"] == 3 and bundle["attempt"]["state"] == attempt.state
    assert bundle["attempt"]["started_at"].startswith("2026-11-30T12:00:00")
    assert bundle["attempt"]["ended_at"].startswith("2026-11-30T12:00:06")
    assert bundle["image"]["digest"] is None and bundle["image"]["reason"]
    assert bundle["execution"]["runner"] == {"name": "cloudpivot-agent", "version": "2.0"}
    assert bundle["execution"]["host"] == {"kernel": "6.1.0-test", "cpu_model": "Test CPU @ 3 GHz", "boot_id": "b" * 36}
    assert bundle["inputs"] == []
    assert bundle["outputs"]["state"] == "complete"
    assert bundle["outputs"]["files"] == [
        {
            "name": "result.csv",
            "state": "stored",
            "bytes": 8,
            "sha256": hashlib.sha256(b"a,b\n1,2\n").hexdigest(),
            "reason": "",
        }
    ]
    assert "/results/outputs/" not in json.dumps(
        bundle
    )  # no download links (they are permissions) in a document meant to travel

    key = APIClient().get("/api/v1/provenance/key")  # no login needed
    assert key.status_code == 200
    served = key.json()
    raw = base64.b64decode(served["public_key_raw"])
    assert len(raw) == 32 and served["key_id"] == hashlib.sha256(raw).hexdigest() == document["signature"]["key_id"]
    assert document["signature"]["alg"] == "Ed25519"
    assert verifies(document, served["public_key_pem"])
    assert "PRIVATE" not in json.dumps(document) + json.dumps(served)

    # One changed byte anywhere in the bundle: the signature no longer verifies.
    tampered = json.loads(json.dumps(document))
    tampered["bundle"]["attempt"]["exit_code"] = 0
    assert not verifies(tampered, served["public_key_pem"])
    text = canonical(document["bundle"])
    flipped = text.replace(b"result.csv", b"result.csw", 1)
    with pytest.raises(InvalidSignature):
        load_pem_public_key(served["public_key_pem"].encode()).verify(
            base64.b64decode(document["signature"]["value"]), flipped
        )


def test_a_foreign_task_is_a_404_and_a_running_attempt_a_409(api, world, key_file):
    attempt = finished_attempt(world.bob, key_file.parent.parent / "results")
    assert api("charlie").get(f"/api/v1/tasks/{attempt.task_id}/provenance").status_code == 404
    assert APIClient().get(f"/api/v1/tasks/{attempt.task_id}/provenance").status_code == 401
    assert api("bob").get(f"/api/v1/tasks/{attempt.task_id}/provenance?attempt=2").status_code == 404

    task, _ = task_submit(user=world.bob, document=hello_spec())
    assert api("bob").get(f"/api/v1/tasks/{task.pk}/provenance").status_code == 404  # no attempt yet
    with transaction.atomic():
        attempt_create(task=task_lock(task.pk), reason="test")
    response = api("bob").get(f"/api/v1/tasks/{task.pk}/provenance")
    assert response.status_code == 409 and response.json()["code"] == "not_finished"


def test_the_key_is_made_once_private_and_the_same_for_racing_processes(key_file):
    assert not key_file.exists()
    found = []

    def make() -> None:
        provenance_key._create(key_file)  # what two processes starting at once would both do
        found.append(key_file.read_bytes())

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(found)) == 1  # the first link won; the others kept it
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert [p.name for p in key_file.parent.iterdir()] == [key_file.name]  # no temporary files left
    first = provenance_key.public_key()
    assert provenance_key.public_key() == first and key_file.read_bytes() == found[0]


def test_the_task_page_links_an_ended_attempts_bundle_which_the_session_downloads(pages, world, key_file):
    attempt = finished_attempt(world.bob, key_file.parent.parent / "results")
    html = pages("bob").get(f"/tasks/{attempt.task_id}/").content.decode()
    link = f"/api/v1/tasks/{attempt.task_id}/provenance?attempt=1"
    assert f'href="{link}"' in html and 'data-provenance="1"' in html
    response = pages("bob").get(link)  # the page's session is enough
    assert response.status_code == 200 and response.json()["bundle"]["attempt"]["number"] == 1
    assert pages("charlie").get(link).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_real_local_task_through_the_host_agent_has_this_hosts_facts_and_a_valid_signature(live, world):
    code = "open('result.csv', 'w').write('x,y\\n')"
    task, _ = task_submit(
        user=world.bob, document=hello_spec(command=["python3", "-c", code], outputs=[{"path": "result.csv"}])
    )
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason
    document = helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task.pk}/provenance", world.tokens["bob"])
    bundle = document["bundle"]
    with open("/proc/sys/kernel/random/boot_id") as handle:
        boot_id = handle.read().strip()
    assert bundle["execution"]["host"]["kernel"] == platform.release()
    assert bundle["execution"]["host"]["boot_id"] == boot_id and bundle["execution"]["host"]["cpu_model"]
    assert bundle["execution"]["runner"]["name"] == "cloudpivot-agent" and bundle["execution"]["runner"]["version"]
    assert bundle["attempt"]["exit_code"] == 0 and bundle["attempt"]["started_at"] and bundle["attempt"]["ended_at"]
    assert bundle["outputs"]["files"][0]["sha256"] == hashlib.sha256(b"x,y\n").hexdigest()
    served = helpers.api_call(live.url, "GET", "/api/v1/provenance/key", "")
    assert verifies(document, served["public_key_pem"])


def test_the_pods_image_id_is_observed_and_becomes_the_bundles_digest(world, key_file):
    pod = {
        "metadata": {"name": "cp-x-1-abcde", "creationTimestamp": "2026-11-30T12:00:00Z"},
        "spec": {"nodeName": "node-7", "containers": [{"name": CONTAINER, "image": "python:3.12"}]},
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": CONTAINER,
                    "imageID": "docker.io/library/python@sha256:" + "c" * 64,
                    "state": {"terminated": {"exitCode": 0}},
                }
            ],
        },
    }
    job = {"metadata": {"uid": "u1"}, "status": {"succeeded": 1}}
    ref = AttemptRef(task_id="t", attempt_id=1, number=1, external_name="cp-x-1", external_ref="u1", spec={})
    seen = observe_attempt(ref, job, pod, timezone.now(), namespace="tasks", image_pull_grace=60)
    assert seen.evidence["image_id"] == "docker.io/library/python@sha256:" + "c" * 64

    attempt = finished_attempt(world.bob, key_file.parent.parent / "results")
    task = attempt.task
    TaskEvent.objects.create(
        task=task, seq=task.last_event_seq + 1, type="observed", data={"attempt": 1, **seen.evidence}
    )
    task.backend = "kubernetes"  # as if it had run there: the bundle reads the image from the attempt's events
    task.normalized = task.normalized | {"image": "python:3.12"}
    bundle = provenance_bundle(task, attempt)
    assert bundle["image"]["reference"] == "python:3.12"
    assert bundle["image"]["digest"] == "docker.io/library/python@sha256:" + "c" * 64
    assert bundle["execution"]["node"] == "node-7"
