"""The record of what an attempt borrowed or created (`StorageReference`, docs/data.md): written once when the
attempt starts (a Kubernetes Job, the cloud's start), released when it ends; created storage is kept or left for
removal, and what nobody removed is listed (results.selectors.storage_left_behind)."""

from __future__ import annotations

import pytest
from django_q.conf import Conf

from results.models import StorageReference
from results.selectors import storage_left_behind
from results.services import storage_begin, storage_end, storage_forget
from tasks.models import Attempt, Task
from tasks.services import reconcile_pass
from tasks.services.submission import task_submit
from tests import builders, helpers
from tests.clusters.kube_api import PVCS


@pytest.mark.django_db(transaction=True)
def test_a_kubernetes_attempt_records_its_claim_in_use_then_released(kube, kube_connection, world, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)
    kube.put(PVCS, "tasks", {"metadata": {"name": "alpha-data", "annotations": {"cloudpivot.io/projects": "alpha"}}})
    document = {
        "cloud": "k3s-lab",
        "image": "busybox:1.36",
        "command": ["true"],
        "data": [{"kind": "pvc", "ref": "alpha-data", "path": "/data", "mode": "rw"}],
    }
    task, _ = task_submit(user=world.bob, document=document)
    reconcile_pass()  # admission and start
    attempt = task.attempts.get()
    (row,) = StorageReference.objects.all()
    assert (row.attempt_id, row.kind, row.ref, row.path, row.mode) == (attempt.pk, "pvc", "alpha-data", "/data", "rw")
    assert (row.role, row.state, row.released_at) == ("borrowed", "in_use", None)
    job = kube.jobs()[attempt.external_name]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["volumeMounts"] == [{"name": "vol-0", "mountPath": "/data", "readOnly": False}]

    name = attempt.external_name
    kube.schedule(name)
    kube.run(name)
    kube.finish(name, 0)
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason
    row.refresh_from_db()
    assert row.state == "released" and row.released_at is not None
    assert StorageReference.objects.count() == 1  # the passes after the start wrote nothing more


SCRATCH = [
    {"kind": "dir", "ref": "/srv/datasets", "mode": "ro"},
    {"kind": "scratch", "ref": "scratch-1", "size_gb": 10, "keep": False, "mode": "rw"},
    {"kind": "scratch", "ref": "results", "size_gb": 5, "keep": True, "mode": "rw"},
]


def attempt_with(world, data) -> Attempt:
    """An admitted local attempt whose task names `data` (as a cloud that mounts these kinds would have kept it)."""
    task = builders.submit(world.bob)
    Task.objects.filter(pk=task.pk).update(normalized={**task.normalized, "data": data})
    return Attempt.objects.select_related("task").get(pk=builders.admit(task).pk)


@pytest.mark.django_db
def test_created_storage_is_kept_or_left_for_removal_and_borrowed_storage_released(world):
    attempt = attempt_with(world, SCRATCH)
    assert storage_begin(attempt=attempt) == 3
    assert storage_begin(attempt=attempt) == 0  # a hand-out sent again records nothing more
    roles = list(StorageReference.objects.values_list("index", "role", "state"))
    assert roles == [(0, "borrowed", "in_use"), (1, "created", "in_use"), (2, "created", "in_use")]
    assert not storage_left_behind().exists()  # its attempt runs

    storage_end(attempt=attempt)
    assert list(StorageReference.objects.values_list("index", "state")) == [
        (0, "released"),
        (1, "released"),
        (2, "kept"),
    ]
    Attempt.objects.filter(pk=attempt.pk).update(closed_at=attempt.created_at)
    # Created, its attempt ended, neither removed nor kept: what the orphan report lists.
    assert [row.ref for row in storage_left_behind()] == ["scratch-1"]

    storage_forget(attempts=[attempt])  # retention: the borrowed record goes, created storage stays on record
    attempt.delete()
    left = StorageReference.objects.order_by("index")
    assert [(row.index, row.state, row.attempt_id) for row in left] == [(1, "released", None), (2, "kept", None)]
    assert [row.ref for row in storage_left_behind()] == ["scratch-1"]


@pytest.mark.django_db
def test_an_attempt_closed_through_the_service_releases_its_storage(world):
    attempt = attempt_with(world, SCRATCH[:1])
    storage_begin(attempt=attempt)
    builders.report(attempt, {"type": "started", "data": {"pid": 4242}}, {"type": "exited", "data": {"exit_code": 0}})
    assert Task.objects.get(pk=attempt.task_id).state == "SUCCEEDED"
    assert StorageReference.objects.get().state == "released"
