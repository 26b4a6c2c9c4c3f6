"""The orphan reconciler on a Kubernetes connection with KubeVirt instances: VirtualMachines, their
snapshots and the DataVolumes a delete keeps are listed beside the Jobs, and the "missing" check reads
each live instance's VirtualMachine (it used to ask the Job-only lister, which refused, so such a
connection was never scanned).

The real `kubernetes` client talks to the loopback API server (kube_fixture.py), which serves KubeVirt.
"""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.backends.kubernetes import LABEL_ATTEMPT, LABEL_INSTALLATION, label_value
from orphans.models import OrphanFinding
from orphans.scan import orphans_scan
from resources.backends.base import CreateRequest
from resources.backends.kubevirt import KubeVirtInstances, vm_name
from resources.choices import InstanceStatus, SnapshotStatus
from resources.models import Instance, Snapshot
from tests.clusters.kube_api import JOBS, VM_SNAPSHOTS, VMS
from tests.plugins.kube import job, ours

pytestmark = pytest.mark.django_db(transaction=True)
IMAGE = "quay.io/containerdisks/fedora:40"


def an_instance(world, connection, name: str, **values) -> Instance:
    return Instance.objects.create(
        name=name,
        project=world.alpha,
        owner=world.bob,
        connection=connection,
        backend="kubernetes",
        flavor="small",
        vcpus=1,
        memory_mb=2048,
        image=IMAGE,
        status=InstanceStatus.RUNNING,
        **values,
    )


def with_vm(backend: KubeVirtInstances, instance: Instance) -> Instance:
    instance.server_id = backend.create(
        CreateRequest(instance_id=str(instance.pk), name=instance.name, flavor_id="small", image=IMAGE)
    )
    Instance.objects.filter(pk=instance.pk).update(server_id=instance.server_id)
    return instance


def vm_snapshot(name: str, snapshot_id: str, installation: str) -> dict:
    return {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineSnapshot",
        "metadata": {
            "name": name,
            "labels": {LABEL_INSTALLATION: installation, "cloudpivot.io/snapshot": snapshot_id},
        },
        "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "cpi-x"}},
    }


def test_a_connection_with_kubevirt_instances_is_scanned_with_its_vms_snapshots_and_kept_data_volumes(
    kube, kube_connection, world
):
    kube.serve_kubevirt()
    kube_connection.options |= {"vm_root_disk": {"size_gb": 5}}
    kube_connection.save()
    backend = KubeVirtInstances(kube_connection)
    installation = label_value(settings.INSTALLATION_ID)
    live = with_vm(backend, an_instance(world, kube_connection, "live"))
    deleted = with_vm(backend, an_instance(world, kube_connection, "deleted"))
    backend.delete(deleted.server_id)  # keeps its DataVolume (released from the VM first)
    kube.vm_deletion_finished(deleted.server_id)
    Instance.objects.filter(pk=deleted.pk).update(status=InstanceStatus.DELETED, deleted_at=timezone.now())
    lost_id = str(uuid.uuid4())
    backend.create(CreateRequest(instance_id=lost_id, name="lost", flavor_id="small", image=IMAGE))  # no row
    vanished = an_instance(world, kube_connection, "vanished", server_id=vm_name(str(uuid.uuid4())))
    kept_snapshot = Snapshot.objects.create(
        name="kept", project=world.alpha, owner=world.bob, connection=kube_connection, instance=live,
        image_id="cps-kept", status=SnapshotStatus.AVAILABLE,
    )  # fmt: skip
    kube.put(VM_SNAPSHOTS, "tasks", vm_snapshot("cps-kept", str(kept_snapshot.pk), installation))
    kube.put(VM_SNAPSHOTS, "tasks", vm_snapshot("cps-lost", str(uuid.uuid4()), installation))
    kube.put(VM_SNAPSHOTS, "tasks", vm_snapshot("cps-theirs", str(uuid.uuid4()), "another-install"))
    kube.put(JOBS, "tasks", job("cp-lost-kv", ours("cp-lost-kv")))
    assert set(kube.objects(VMS)) == {live.server_id, vm_name(lost_id)}

    summary = orphans_scan(connections=[kube_connection])

    assert summary.startswith("k3s-lab: 6 found"), summary  # scanned, not "not scanned (...)"
    found = {(f.kind, f.ref): f for f in OrphanFinding.objects.filter(connection=kube_connection)}
    lost_vm = vm_name(lost_id)
    assert {key: f.category for key, f in found.items()} == {
        ("job", "cp-lost-kv"): "orphan",
        ("vm", lost_vm): "orphan",
        ("data_volume", f"{lost_vm}-root"): "orphan",
        ("data_volume", f"{deleted.server_id}-root"): "stale",
        ("vm_snapshot", "cps-lost"): "orphan",
        ("vm", vanished.server_id): "missing",
    }
    assert f"tagged for instance {lost_id}" in found["vm", lost_vm].reason
    assert found["data_volume", f"{lost_vm}-root"].protected_reason == f"owned by VirtualMachine {lost_vm}"
    assert "was deleted keeping its disk" in found["data_volume", f"{deleted.server_id}-root"].reason
    assert found["vm", vanished.server_id].reason == f"instance {vanished} (Running) expects it"
    assert found["job", "cp-lost-kv"].evidence["labels"][LABEL_ATTEMPT] == "cp-lost-kv"


def test_without_kubevirt_the_scan_lists_jobs_and_asks_for_no_kubevirt_objects(kube, kube_connection, world):
    kube.put(JOBS, "tasks", job("cp-lost-nokv", ours("cp-lost-nokv")))
    an_instance(world, kube_connection, "vanished", server_id=vm_name(str(uuid.uuid4())))

    summary = orphans_scan(connections=[kube_connection])

    assert summary == "k3s-lab: 2 found, 0 resolved", summary
    assert set(OrphanFinding.objects.values_list("kind", "category")) == {("job", "orphan"), ("vm", "missing")}
