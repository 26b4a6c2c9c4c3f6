"""Will it fit? `POST /api/v1/tasks?dry_run=true` answers starts_now / waits / never_fits with the limit named,
against CloudPivot's quotas (local cloud) and a Kubernetes cluster's own limits (the loopback kmock API
server: ResourceQuota, LimitRange, node allocatable with GPUs). Nothing is ever created by a dry run.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from cloudpivot.accounts.models import Quota
from tasks.models import Task
from tasks.services.admission import admit_all
from tests.builders import hello_spec
from tests.clusters.kube_api import LIMIT_RANGES, NODES, RESOURCE_QUOTAS
from tests.plugins.kube import node
from usage.models import ProjectBudget


def dry_run(api, document, user="bob"):
    response = api(user).post("/api/v1/tasks?dry_run=true", document, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def kube_task(**resources):
    return {"cloud": "k3s-lab", "image": "busybox:1.36", "command": ["true"], "resources": resources}


# ---------------------------------------------------------------------- CloudPivot's own quotas (local cloud)
def test_a_dry_run_creates_nothing_and_says_starts_now(api, world):
    assert dry_run(api, hello_spec()) == {
        "outcome": "starts_now",
        "message": "Starts now",
        "limit": None,
        "queued_ahead": 0,
        "notes": [],
    }
    assert not Task.objects.exists()


def test_a_connection_with_dispatch_off_waits_and_says_so(api, world):
    world.local.dispatch_enabled = False
    world.local.save(update_fields=["dispatch_enabled"])
    verdict = dry_run(api, hello_spec())
    assert verdict["outcome"] == "waits" and verdict["limit"] is None
    assert (
        verdict["message"]
        == "Waits: 0 ahead, held: dispatch is off on the local cloud; tasks wait until an admin turns it on"
    )


def test_a_budget_at_its_hard_stop_waits_and_names_it(api, world):
    ProjectBudget.objects.create(
        project=world.alpha,
        core_hours=Decimal("1"),
        hard_stop=True,
        held_reason=("waiting: project alpha has used 1.0 of its 1 core-hour budget for 2026-12 (hard stop)"),
    )
    verdict = dry_run(api, hello_spec())
    assert verdict["outcome"] == "waits"
    assert verdict["message"].startswith("Waits: 0 ahead, held: project alpha has used 1.0 of its 1 core-hour budget")


def test_more_than_a_whole_quota_never_fits_and_names_it(api, world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_vcpu=2)
    verdict = dry_run(api, hello_spec(resources={"cpu": 4}))
    assert verdict["outcome"] == "never_fits"
    assert verdict["limit"] == {
        "resource": "cpu",
        "requested": 4,
        "available": None,
        "limit": 2,
        "source": "project alpha's quota on local",
    }
    assert verdict["message"] == "Never fits: CPU 4 > 2 (project alpha's quota on local)"
    assert not Task.objects.exists()


def test_the_project_queue_ahead_is_played_before_the_new_task(api, world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_vcpu=2)
    for i in range(3):
        assert api("bob").post("/api/v1/tasks", hello_spec(name=f"t{i}"), format="json").status_code == 201
    verdict = dry_run(api, hello_spec())
    assert verdict["outcome"] == "waits"
    assert verdict["queued_ahead"] == 3
    assert verdict["limit"] == {
        "resource": "cpu",
        "requested": 1,
        "available": 0,
        "limit": 2,
        "source": "project alpha's quota on local",
    }
    assert verdict["message"] == "Waits: 3 ahead, held by project alpha's quota on local: CPU 2/2 in use, asks 1"
    assert Task.objects.count() == 3


def test_admitted_tasks_hold_the_quota(api, world):
    Quota.objects.create(project=world.alpha, connection=None, max_tasks=1)
    assert api("bob").post("/api/v1/tasks", hello_spec(), format="json").status_code == 201
    assert admit_all(agent_served_too=False) == 1
    verdict = dry_run(api, hello_spec())
    assert verdict["outcome"] == "waits" and verdict["queued_ahead"] == 0
    assert verdict["message"] == "Waits: 0 ahead, held by project alpha's quota on all clouds: tasks 1/1 in use, asks 1"


@pytest.mark.parametrize("query", ["dry_run=null", "dry_run=maybe", "dry_run=true&dry_run=false"])
def test_a_dry_run_flag_that_is_not_true_or_false_is_a_400_and_creates_nothing(api, world, query):
    response = api("bob").post(f"/api/v1/tasks?{query}", hello_spec(), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == "dry_run"
    assert not Task.objects.exists()
    assert api("bob").post("/api/v1/tasks?dry_run=false", hello_spec(), format="json").status_code == 201


def test_a_bad_document_is_still_a_400_naming_the_field(api, world):
    response = api("bob").post("/api/v1/tasks?dry_run=true", {"cloud": "local", "command": "true"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "command"
    response = api("bob").post("/api/v1/tasks?dry_run=true", {"cloud": "nowhere", "command": ["x"]}, format="json")
    assert response.status_code in (400, 404) and response.json()["errors"][0]["field"] == "cloud"
    assert not Task.objects.exists()


# ---------------------------------------------------------------------- the cluster's own limits (kmock)
def test_a_resource_quota_in_use_holds_the_task(api, kube, kube_connection):
    quota = {
        "metadata": {"name": "compute"},
        "spec": {"hard": {"requests.cpu": "4", "requests.memory": "8Gi", "count/jobs.batch": "10"}},
        "status": {
            "hard": {"requests.cpu": "4", "requests.memory": "8Gi", "count/jobs.batch": "10"},
            "used": {"requests.cpu": "3500m", "requests.memory": "1Gi", "count/jobs.batch": "2"},
        },
    }
    kube.put(RESOURCE_QUOTAS, "tasks", quota)
    assert dry_run(api, kube_task(cpu=0.5, memory_mb=1024))["outcome"] == "starts_now"
    verdict = dry_run(api, kube_task(cpu=1, memory_mb=1024))
    assert verdict["outcome"] == "waits"
    assert verdict["limit"] == {
        "resource": "cpu",
        "requested": 1,
        "available": 0.5,
        "limit": 4,
        "source": "ResourceQuota tasks/compute",
    }
    assert verdict["message"] == "Waits: 0 ahead, held by ResourceQuota tasks/compute: CPU 3.5/4 in use, asks 1"
    verdict = dry_run(api, kube_task(cpu=1, memory_mb=16384))
    assert verdict["outcome"] == "never_fits"
    assert verdict["message"] == "Never fits: memory 16384 MB > 8192 MB (ResourceQuota tasks/compute)"
    assert not Task.objects.exists()


def test_a_limit_range_max_never_fits(api, kube, kube_connection):
    limit_range = {
        "metadata": {"name": "per-container"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "2", "memory": "4Gi"}}]},
    }
    kube.put(LIMIT_RANGES, "tasks", limit_range)
    verdict = dry_run(api, kube_task(cpu=3, memory_mb=1024))
    assert verdict["outcome"] == "never_fits"
    assert verdict["limit"]["source"] == "LimitRange tasks/per-container (Container max)"
    assert verdict["message"] == "Never fits: CPU 3 > 2 (LimitRange tasks/per-container (Container max))"


def test_node_allocatable_bounds_memory_and_gpus(api, kube, kube_connection):
    kube.put(NODES, None, node("small", cpu="4", memory="16Gi"))
    kube.put(NODES, None, node("gpu-1", cpu="8", memory="8Gi", gpus="2"))
    kube.put(NODES, None, node("down", cpu="64", memory="256Gi", gpus="8", ready=False))
    verdict = dry_run(api, kube_task(cpu=1, memory_mb=65536))
    assert verdict["outcome"] == "never_fits"
    assert verdict["limit"] == {
        "resource": "memory_mb",
        "requested": 65536,
        "available": None,
        "limit": 16384,
        "source": "node allocatable, largest node",
    }
    assert verdict["message"] == "Never fits: memory 65536 MB > 16384 MB (node allocatable, largest node)"
    verdict = dry_run(api, kube_task(cpu=1, memory_mb=1024, gpu=4))
    assert verdict["outcome"] == "never_fits"
    assert verdict["message"] == "Never fits: GPUs 4 > 2 (node allocatable, largest node)"
    assert dry_run(api, kube_task(cpu=1, memory_mb=1024, gpu=2))["outcome"] == "starts_now"
    assert not Task.objects.exists()


def test_a_cluster_that_cannot_be_read_is_a_note_not_an_error(api, kube, kube_connection):
    kube.configure(permissions={("create", "batch", "jobs", "")})  # nothing to read quotas, limits or nodes with
    verdict = dry_run(api, kube_task(cpu=1, memory_mb=512))
    assert verdict["outcome"] == "starts_now"
    assert len(verdict["notes"]) == 3 and all("forbidden" in note.lower() or "not" in note for note in verdict["notes"])


@pytest.mark.parametrize("path", ["/api/v1/tasks?dry_run=true", "/api/v1/tasks?dry_run=1"])
def test_dry_run_spellings(api, world, path):
    assert api("bob").post(path, hello_spec(), format="json").status_code == 200
    assert not Task.objects.exists()


# ---------------------------------------------------------------------- the submit form's line (test client)
def test_the_forms_line_answers_with_the_verdict_or_what_to_fill_in(pages, world, kube, kube_connection):
    Quota.objects.create(project=world.alpha, connection=world.local, max_vcpu=2)
    form = {"form-cloud": "local", "form-project": "alpha", "form-retry_limit": "0"}
    response = pages("bob").post("/tasks/new/fit", form)  # no command yet: the fit is told all the same
    assert response.status_code == 200
    assert b'data-outcome="starts_now"' in response.content and b"Starts now" in response.content
    kube_form = form | {"form-cloud": "k3s-lab", "form-cpu": "1"}
    response = pages("bob").post("/tasks/new/fit", kube_form)  # a Kubernetes task needs an image first
    assert b"Will it fit? Image: Name the image to run" in response.content
    response = pages("bob").post("/tasks/new/fit", kube_form | {"form-image": "busybox"})
    assert b'data-outcome="starts_now"' in response.content
    assert pages("bob").get("/tasks/new/fit").status_code == 405
    assert not Task.objects.exists()
