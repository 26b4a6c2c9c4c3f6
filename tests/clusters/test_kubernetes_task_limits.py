"""What a Kubernetes task may ask for, as a submitter meets it through POST /api/v1/tasks.

Claims: only those annotated for the task's project (`cloudpivot.io/projects`), never a CloudPivot instance's
disk; node selectors and tolerations: only what the connection allows; resources: the connection's defaults
when the task names none, counted by admission. The cluster is the loopback API server (kmock).
"""

from __future__ import annotations

import pytest

from cloudpivot.accounts.models import Quota
from tasks.models import Task
from tasks.services.admission import admit_all
from tests.clusters.kube_api import DATA_VOLUMES, PVCS


def submit(api, user="bob", **spec):
    document = {"cloud": "k3s-lab", "image": "busybox:1.36", "command": ["true"], **spec}
    return api(user).post("/api/v1/tasks", document, format="json")


def claim(kube, name: str, *, projects: str | None = None, labels=None, owners=None) -> None:
    metadata = {"name": name, "labels": labels or {}, "annotations": {}}
    if projects is not None:
        metadata["annotations"]["cloudpivot.io/projects"] = projects
    if owners:
        metadata["ownerReferences"] = owners
    kube.put(PVCS, "tasks", {"metadata": metadata, "spec": {"accessModes": ["ReadWriteOnce"]}})


def mount(name: str) -> dict:
    return {"volumes": [{"claim": name, "mount_path": "/data"}]}


def refusal(response) -> dict:
    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    return error


def test_a_task_mounts_only_claims_annotated_for_its_project(api, kube, kube_connection):
    claim(kube, "alpha-data", projects="alpha")
    claim(kube, "shared", projects="*")
    claim(kube, "beta-data", projects="beta, gamma")
    claim(kube, "nobodys")
    assert submit(api, **mount("alpha-data")).status_code == 201
    assert submit(api, **mount("shared")).status_code == 201
    error = refusal(submit(api, **mount("beta-data")))
    assert error["field"] == "volumes.0.claim"
    assert error["message"].startswith("project alpha may not use PersistentVolumeClaim beta-data in namespace tasks")
    assert refusal(submit(api, **mount("nobodys")))["field"] == "volumes.0.claim"
    assert refusal(submit(api, **mount("missing")))["message"] == (
        "there is no PersistentVolumeClaim missing in namespace tasks of the k3s-lab cloud"
    )
    assert Task.objects.count() == 2


def test_a_task_never_mounts_a_cloudpivot_instance_disk(api, kube, kube_connection):
    instance = {"cloudpivot.io/instance": "0f0e0d0c", "cloudpivot.io/installation": "default"}
    claim(kube, "vm-root-labelled", projects="*", labels=instance)
    # CDI's claim of a DataVolume root disk: unlabelled, owned by the DataVolume CloudPivot labelled.
    kube.serve_kubevirt()
    kube.put(DATA_VOLUMES, "tasks", {"metadata": {"name": "cp-vm-1-root", "labels": instance}, "spec": {}})
    owner = [{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "name": "cp-vm-1-root", "uid": "u1"}]
    claim(kube, "cp-vm-1-root", projects="*", owners=owner)
    for name in ("vm-root-labelled", "cp-vm-1-root"):
        assert refusal(submit(api, **mount(name))) == {
            "field": "volumes.0.claim",
            "message": f"PersistentVolumeClaim {name} is the disk of a CloudPivot VM instance; "
            "tasks never mount instance disks",
        }
    assert not Task.objects.exists()


def test_node_selectors_and_tolerations_are_limited_to_what_the_connection_allows(api, kube_connection):
    gpu = {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}
    error = refusal(submit(api, node_selector={"pool": "gpu"}))
    assert error == {
        "field": "node_selector.pool",
        "message": "the k3s-lab cloud does not let tasks choose nodes by pool (keys it allows: none)",
    }
    error = refusal(submit(api, tolerations=[gpu]))
    assert error["field"] == "tolerations.0" and "does not allow the toleration gpu=yes:NoSchedule" in error["message"]

    kube_connection.options |= {
        "allowed_node_selectors": {"pool": ["batch", "gpu"], "zone": "*"},
        "allowed_tolerations": [{"key": "gpu", "effect": "NoSchedule"}],
    }
    kube_connection.save()
    assert submit(api, node_selector={"pool": "gpu", "zone": "b"}, tolerations=[gpu]).status_code == 201
    assert refusal(submit(api, node_selector={"pool": "system"}))["message"] == (
        "the k3s-lab cloud allows pool to be one of batch, gpu, not 'system'"
    )
    # A toleration wider than the allowed entry (any effect of the key; every taint) is refused.
    for wider in ({"key": "gpu", "operator": "Exists"}, {"operator": "Exists"}):
        assert refusal(submit(api, tolerations=[gpu, wider]))["field"] == "tolerations.1"
    assert Task.objects.count() == 1


def test_a_task_without_resources_gets_and_counts_the_connections_defaults(api, kube, kube_connection):
    kube_connection.options |= {"default_resources": {"cpu": 0.5, "memory_mb": 600}}
    kube_connection.save()
    Quota.objects.create(project=kube_connection.projects.get(), connection=kube_connection, max_memory_mb=1000)
    first, second = (submit(api, name=f"t{i}").json()["id"] for i in range(2))
    assert Task.objects.get(pk=first).normalized["resources"] == {"cpu": 0.5, "memory_mb": 600, "gpu": 0}
    assert admit_all() == 1
    waiting = Task.objects.get(pk=second)
    assert waiting.state == "PENDING"
    assert waiting.state_reason == "waiting: project alpha quota on k3s-lab: 600/1000 MB memory in use"
    # What the Job asks of the cluster is what was counted.
    from clusters.backends import get_backend
    from tasks.services.attempts import attempt_ref

    job = get_backend(kube_connection).job(attempt_ref(Task.objects.get(pk=first).attempts.get()))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "600Mi"},
        "limits": {"cpu": "500m", "memory": "600Mi"},
    }


@pytest.mark.parametrize("asked", [{"cpu": 2}, {"memory_mb": 100}])
def test_what_a_task_asks_is_what_it_counts(api, kube_connection, asked):
    task = Task.objects.get(pk=submit(api, resources=asked).json()["id"])
    assert task.normalized["resources"] == {"cpu": 1, "memory_mb": 1024, "gpu": 0} | asked
