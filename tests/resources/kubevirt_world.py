"""The KubeVirt test world: a `kv` cluster fixture, a worker thread per operation job, as django-q runs them, and
the steps the tests share (a running VM, a delete keeping its disks, a guest of someone else's on a disk).

Shared by tests/resources/test_kubevirt*.py; `kv` reaches them through tests/resources/conftest.py.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from resources import jobs
from resources.models import Instance, Operation
from tests.clusters.kube_api import VMIS
from tests.helpers import wait_for
from tests.plugins.kube import kube_connection_to

NS = "tasks"
SETTLE = 0.6  # long enough for a dozen polls at INSTANCE_POLL_SECONDS: the operation had every chance to end


def make_connection(kube, token_file, world, cloud_id="kv-lab", **options):
    flavors = {"small": {"vcpus": 1, "memory_mb": 1024}, "big": {"vcpus": 2, "memory_mb": 4096}}
    return kube_connection_to(
        kube.url, token_file, world.alpha, cloud_id=cloud_id, scope=NS, options={"vm_flavors": flavors} | options
    )


@pytest.fixture
def kv(transactional_db, world, kube, token_file, settings):
    """A cluster with KubeVirt: `kv-lab` (DataVolume root disks) and `kv-ephemeral` (containerDisks)."""
    settings.INSTANCE_OPERATION_DEADLINE_SECONDS = 20
    settings.INSTANCE_POLL_SECONDS = 0.05
    kube.serve_kubevirt()
    kube.kubevirt_cr(version="v1.5.2", feature_gates=("Snapshot",))  # snapshots work; tests change it
    make_connection(kube, token_file, world, vm_root_disk={"size_gb": 5, "storage_class": "local-path"})
    make_connection(kube, token_file, world, cloud_id="kv-ephemeral")
    return kube


class Worker:
    """Runs one operation's job in a thread, as a django-q worker would."""

    def __init__(self, operation_id: str) -> None:
        self.operation_id = operation_id
        self.result: str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = jobs.run_operation(self.operation_id)
        finally:
            connections.close_all()

    def join(self) -> str:
        self.thread.join(30)
        assert not self.thread.is_alive(), "the operation job did not finish"
        return self.result


def asked(cluster, worker: Worker, count: int = 1) -> list:
    """Wait for the job's virt-api request; an operation that ended first says why."""

    def made():
        op = operation(worker.operation_id)
        assert op.state in ("pending", "running"), (op.state, op.error_message)
        return len(cluster.virt_api_calls()) >= count

    wait_for(made, what="the virt-api request")
    return cluster.virt_api_calls()


def operation(operation_id: str) -> Operation:
    return Operation.objects.get(pk=operation_id)


def still_running(operation_id: str) -> None:
    """The operation is running, and still is after a while: nothing was concluded from the request alone."""
    wait_for(lambda: operation(operation_id).state == "running", what="the operation to start")
    time.sleep(SETTLE)
    op = operation(operation_id)
    assert op.state == "running", (op.state, op.error_message)


def act(api, instance_id: str, action: str, user: str = "bob", **params):
    return api(user).post(f"/api/v1/instances/{instance_id}/actions", {"action": action, **params}, format="json")


def accepted(response) -> str:
    assert response.status_code == 202, response.json()
    return response.json()["id"]


def succeeded(worker: Worker) -> Operation:
    assert worker.join() == "succeeded", operation(worker.operation_id).error_message
    return operation(worker.operation_id)


def create_running(api, cluster, cloud="kv-lab", name="vm1", **extra) -> tuple[str, str]:
    """POST an instance (with `extra` fields: volumes) and bring it up as KubeVirt would; returns (instance id,
    VM name)."""
    response = api("bob").post(
        "/api/v1/instances",
        {"name": name, "cloud": cloud, "flavor": "small", "image": "quay.io/containerdisks/fedora:40"} | extra,
        format="json",
    )
    op_id = accepted(response)
    instance_id = response.json()["instance"]
    worker = Worker(op_id)
    vm_name = wait_for(lambda: Instance.objects.get(pk=instance_id).server_id, what="the VM to be created")
    cluster.vm_status(vm_name, "Starting")
    cluster.vm_running(vm_name)
    succeeded(worker)
    return instance_id, vm_name


def delete_keeping(api, kv, instance_id: str, name: str, volumes: str = "keep"):
    """A delete through the API, KubeVirt playing its part: the VM stopped, then gone once its finalizer ran."""
    delete = Worker(accepted(act(api, instance_id, "delete", volumes=volumes)))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "Halted", what="runStrategy Halted")
    kv.vm_stopped(name)
    wait_for(lambda: kv.vm(name)["metadata"].get("deletionTimestamp"), what="the VM to be deleted")
    kv.vm_deletion_finished(name)
    return succeeded(delete)


def guest_on(kv, disk: str, vmi: str = "someone-elses-vm") -> str:
    """A VirtualMachineInstance (not CloudPivot's) running on the disk: what KubeVirt would write through."""
    kv.put(
        VMIS,
        NS,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": vmi},
            "spec": {"volumes": [{"name": "data", "dataVolume": {"name": disk}}]},
        },
    )
    return f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances/{vmi}"
