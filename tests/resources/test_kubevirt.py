"""VM instances on Kubernetes through KubeVirt, through the API, against the loopback API server.

The official client talks HTTP to tests/clusters/kube_fixture.py, which serves KubeVirt's API groups,
plays virt-api (subresources, with its refusals) and the VM controller's finalizer and DataVolumes.
The test plays the rest of KubeVirt's controllers (status transitions, snapshot readiness, restores),
and runs each queued operation job in a thread, as a worker would, so it can show that an operation
stays running until the post-condition is observed.
"""

from __future__ import annotations

import uuid

from resources.backends import get_instance_backend
from resources.models import Instance, Operation, Snapshot
from tests.clusters.kube_api import DATA_VOLUMES, VM_RESTORES, VM_SNAPSHOTS, VMS
from tests.helpers import wait_for
from tests.resources.kubevirt_world import (
    NS,
    Worker,
    accepted,
    act,
    asked,
    create_running,
    make_connection,
    operation,
    still_running,
    succeeded,
)


# ---------------------------------------------------------------------------- create, stop, start
def test_create_makes_a_labelled_vm_and_succeeds_only_once_kubevirt_shows_it_running(kv, api, world, settings):
    response = api("bob").post(
        "/api/v1/instances",
        {"name": "vm1", "cloud": "kv-lab", "flavor": "big", "image": "quay.io/containerdisks/fedora:40"},
        format="json",
    )
    op_id = accepted(response)
    instance_id = response.json()["instance"]
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.vcpus, instance.memory_mb, instance.disk_gb, instance.backend) == (2, 4096, 5, "kubernetes")
    worker = Worker(op_id)
    name = wait_for(lambda: Instance.objects.get(pk=instance_id).server_id, what="the VM to be created")
    vm = kv.vm(name)
    labels = vm["metadata"]["labels"]
    assert labels["cloudpivot.io/instance"] == instance_id
    assert labels["cloudpivot.io/installation"] == str(settings.INSTALLATION_ID)[:63]
    spec = vm["spec"]
    assert spec["runStrategy"] == "RerunOnFailure"  # a guest that shuts down stays off
    domain = spec["template"]["spec"]["domain"]
    assert domain["cpu"] == {"cores": 2} and domain["memory"] == {"guest": "4096Mi"}
    template = spec["dataVolumeTemplates"][0]
    assert template["spec"]["source"] == {"registry": {"url": "docker://quay.io/containerdisks/fedora:40"}}
    assert template["spec"]["storage"]["storageClassName"] == "local-path"
    assert spec["template"]["spec"]["volumes"] == [{"name": "rootdisk", "dataVolume": {"name": f"{name}-root"}}]
    assert vm["metadata"]["finalizers"] == ["kubevirt.io/virtualMachineControllerFinalize"]
    assert f"{name}-root" in kv.objects(DATA_VOLUMES)

    still_running(op_id)  # the VM has no status yet
    kv.vm_status(name, "Provisioning")
    still_running(op_id)
    assert Instance.objects.get(pk=instance_id).status == "Pending"
    kv.vm_status(name, "Starting")
    still_running(op_id)
    assert Instance.objects.get(pk=instance_id).status == "Starting"
    kv.vm_running(name)
    op = succeeded(worker)
    assert op.result["server_id"] == name and op.result["observed"]["printable_status"] == "Running"
    shown = api("rita").get(f"/api/v1/instances/{instance_id}").json()
    assert shown["status"] == "Running" and shown["server_id"] == name and shown["operation"] is None
    assert shown["status_reason"] == "KubeVirt: Running"


def test_stop_and_start_set_the_run_strategy_and_wait_for_the_controller(kv, api):
    instance_id, name = create_running(api, kv)

    stop = Worker(accepted(act(api, instance_id, "stop")))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "Halted", what="runStrategy Halted")
    still_running(stop.operation_id)  # the VM still shows Running: the controller has not acted yet
    kv.vm_status(name, "Stopping")
    still_running(stop.operation_id)
    kv.vm_stopped(name)
    succeeded(stop)
    assert Instance.objects.get(pk=instance_id).status == "Stopped"
    assert kv.vmi(name) is None

    start = Worker(accepted(act(api, instance_id, "start")))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "RerunOnFailure", what="runStrategy RerunOnFailure")
    still_running(start.operation_id)  # Stopped with runStrategy RerunOnFailure and no VMI: not settled
    kv.vm_running(name)
    succeeded(start)
    instance = Instance.objects.get(pk=instance_id)
    assert instance.status == "Running" and instance.boot_id == 2


def test_an_image_that_cannot_be_pulled_fails_the_create_at_its_deadline_in_kubevirts_words(kv, api, settings):
    settings.INSTANCE_OPERATION_DEADLINE_SECONDS = 1.5
    response = api("bob").post(
        "/api/v1/instances",
        {"name": "vm1", "cloud": "kv-ephemeral", "flavor": "small", "image": "quay.io/nope/missing:1"},
        format="json",
    )
    worker = Worker(accepted(response))
    instance_id = response.json()["instance"]
    name = wait_for(lambda: Instance.objects.get(pk=instance_id).server_id, what="the VM to be created")
    message = 'Back-off pulling image "quay.io/nope/missing:1"'
    kv.vm_status(name, "ImagePullBackOff", conditions=[{"type": "Ready", "status": "False", "reason": "PodNotExists"}])
    kv.vm_status(
        name,
        "ImagePullBackOff",
        conditions=[{"type": "Failure", "status": "True", "reason": "ImagePullBackOff", "message": message}],
    )
    assert worker.join().startswith("failed")
    op = operation(worker.operation_id)
    assert op.error_kind == "timeout" and "last seen ImagePullBackOff" in op.error_message
    instance = Instance.objects.get(pk=instance_id)
    assert instance.status == "Failed"
    assert instance.status_reason == f"KubeVirt: ImagePullBackOff: {message}"


# ---------------------------------------------------------------------------- restart, pause
def test_a_soft_restart_succeeds_only_after_a_new_vmi_runs(kv, api):
    instance_id, name = create_running(api, kv)
    first = kv.vmi(name)["metadata"]["uid"]
    worker = Worker(accepted(act(api, instance_id, "reboot", type="soft")))
    assert asked(kv, worker) == [("virtualmachines", name, "restart", {})]
    # virt-api wrote the Stop+Start requests; the VM still shows Running, which is not a restart
    assert kv.vm(name)["status"]["printableStatus"] == "Running"
    still_running(worker.operation_id)
    new = kv.vm_restarted(name)
    op = succeeded(worker)
    assert new["metadata"]["uid"] != first and op.result["type"] == "soft"


def test_a_hard_restart_kills_the_vmi_at_once(kv, api):
    instance_id, name = create_running(api, kv)
    worker = Worker(accepted(act(api, instance_id, "reboot", type="hard")))
    assert asked(kv, worker) == [("virtualmachines", name, "restart", {"gracePeriodSeconds": 0})]
    assert kv.vmi(name) is None  # grace period 0: virt-api deleted the VMI before answering
    still_running(worker.operation_id)
    kv.vm_restarted(name)
    succeeded(worker)


def test_pause_and_unpause_go_through_virt_api_and_wait_for_the_paused_condition(kv, api):
    instance_id, name = create_running(api, kv)
    pause = Worker(accepted(act(api, instance_id, "pause")))
    assert asked(kv, pause) == [("virtualmachineinstances", name, "pause", {})]
    still_running(pause.operation_id)
    kv.vm_paused(name)
    succeeded(pause)
    assert Instance.objects.get(pk=instance_id).status == "Paused"

    unpause = Worker(accepted(act(api, instance_id, "unpause")))
    asked(kv, unpause, 2)
    still_running(unpause.operation_id)
    kv.vm_paused(name, paused=False)
    succeeded(unpause)
    assert Instance.objects.get(pk=instance_id).status == "Running"


# ---------------------------------------------------------------------------- snapshot, restore, delete
def test_snapshot_then_restore_while_stopped_and_delete_keeping_the_data_volume(kv, api):
    instance_id, name = create_running(api, kv)

    response = act(api, instance_id, "snapshot", name="before-upgrade")
    worker = Worker(accepted(response))
    snapshot_id = response.json()["snapshot"]
    snapshot_name = f"cps-{snapshot_id.replace('-', '')}"
    wait_for(lambda: snapshot_name in kv.objects(VM_SNAPSHOTS), what="the VirtualMachineSnapshot")
    created = kv.objects(VM_SNAPSHOTS)[snapshot_name]
    assert created["spec"]["source"] == {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": name}
    still_running(worker.operation_id)
    kv.snapshot_progress(snapshot_name)
    still_running(worker.operation_id)
    kv.snapshot_ready(snapshot_name)
    succeeded(worker)
    snapshot = Snapshot.objects.get(pk=snapshot_id)
    assert (snapshot.status, snapshot.image_id) == ("available", snapshot_name)

    refused = act(api, instance_id, "restore", snapshot=snapshot_id)
    assert refused.status_code == 409, refused.json()
    assert refused.json()["code"] == "invalid_state"
    assert "KubeVirt restores only a stopped VirtualMachine" in refused.json()["message"]
    assert refused.json()["errors"][0]["field"] == "action"
    assert kv.objects(VM_RESTORES) == {}

    stop = Worker(accepted(act(api, instance_id, "stop")))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "Halted", what="runStrategy Halted")
    kv.vm_stopped(name)
    succeeded(stop)

    restore = Worker(accepted(act(api, instance_id, "restore", snapshot=snapshot_id)))
    restore_name = wait_for(lambda: next(iter(kv.objects(VM_RESTORES)), None), what="the VirtualMachineRestore")
    made = kv.objects(VM_RESTORES)[restore_name]
    assert made["spec"] == {
        "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": name},
        "virtualMachineSnapshotName": snapshot_name,
    }
    still_running(restore.operation_id)  # Stopped, but the restore is not complete
    kv.restore_progress(restore_name)
    still_running(restore.operation_id)
    kv.restore_done(restore_name)
    op = succeeded(restore)
    assert op.result["image_id"] == snapshot_name
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.status, instance.image) == ("Stopped", snapshot_name)

    missing = act(api, instance_id, "delete")
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "volumes"
    delete = Worker(accepted(act(api, instance_id, "delete", volumes="keep")))
    wait_for(lambda: kv.vm(name)["metadata"].get("deletionTimestamp"), what="the VM to be deleted")
    dv = kv.objects(DATA_VOLUMES)[f"{name}-root"]
    # the VM controller re-adopts an unowned DataVolume until the VM is being deleted: releasing it before the
    # delete (the old order) leaves it owned here, and the garbage collector takes it with the VM
    assert not dv["metadata"].get("ownerReferences"), "the DataVolume is still owned by the VM"
    assert kv.vm_delete_policies() == [(name, "Orphan")]
    still_running(delete.operation_id)  # the VM controller's finalizer holds the VM
    kv.vm_deletion_finished(name)
    op = succeeded(delete)
    assert kv.vm(name) is None and kv.vmi(name) is None
    assert f"{name}-root" in kv.objects(DATA_VOLUMES), "a delete with volumes=keep lost the root disk"
    assert op.result["volumes"].startswith("kept") and op.result["kept"] == [f"datavolume/{name}-root"]
    assert Instance.objects.get(pk=instance_id).status == "Deleted"


def snapshot_ready(api, kv, instance_id: str) -> tuple[str, str]:
    """A snapshot of the instance, made ready as KubeVirt's snapshot controller would; (snapshot id, its name)."""
    response = act(api, instance_id, "snapshot")
    worker = Worker(accepted(response))
    snapshot_id = response.json()["snapshot"]
    snapshot_name = f"cps-{snapshot_id.replace('-', '')}"
    wait_for(lambda: snapshot_name in kv.objects(VM_SNAPSHOTS), what="the VirtualMachineSnapshot")
    kv.snapshot_ready(snapshot_name)
    succeeded(worker)
    return snapshot_id, snapshot_name


def test_deleting_a_snapshot_deletes_its_virtual_machine_snapshot(kv, api):
    instance_id, _ = create_running(api, kv)
    snapshot_id, snapshot_name = snapshot_ready(api, kv, instance_id)
    worker = Worker(accepted(api("bob").delete(f"/api/v1/snapshots/{snapshot_id}")))
    succeeded(worker)
    assert snapshot_name not in kv.objects(VM_SNAPSHOTS)
    assert Snapshot.objects.get(pk=snapshot_id).status == "deleted"


def test_a_snapshot_is_found_by_its_id_as_a_resumed_operation_looks_for_it(kv, api):
    """What services/run.py adopts when it resumes a snapshot whose image id was never written down."""
    instance_id, _ = create_running(api, kv)
    snapshot_id, snapshot_name = snapshot_ready(api, kv, instance_id)
    backend = get_instance_backend(Instance.objects.get(pk=instance_id).connection)
    assert backend.snapshot_image(snapshot_id, name="any") == snapshot_name
    assert backend.snapshot_image(str(uuid.uuid4()), name="any") is None


def test_a_new_instance_from_a_snapshot_is_refused_before_anything_is_made(kv, api):
    instance_id, _ = create_running(api, kv)
    snapshot_id, _ = snapshot_ready(api, kv, instance_id)
    response = api("bob").post(
        f"/api/v1/snapshots/{snapshot_id}/restore", {"name": "copy", "flavor": "small"}, format="json"
    )
    assert response.status_code == 422, response.json()
    assert response.json()["code"] == "unsupported" and response.json()["errors"][0]["field"] == "snapshot"
    assert "restore the snapshot onto its own instance" in response.json()["message"]
    assert Instance.objects.count() == 1


def test_refresh_sees_what_happened_behind_cloudpivots_back(kv, api):
    from resources.services import instances_refresh

    instance_id, name = create_running(api, kv)
    other_id, other = create_running(api, kv, name="vm2")
    path = f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines/{name}"
    kv.call(lambda: kv.api.system("PATCH", path, {"spec": {"runStrategy": "Halted"}}))  # someone ran `virtctl stop`
    kv.vm_stopped(name)
    kv.vm_deletion_finished(other)  # … and deleted the other VM (the finalizer let it go)
    kv.call(lambda: kv.api.system("DELETE", f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines/{other}"))
    assert kv.vm(other) is None
    assert instances_refresh() == "observed 2 instances, 2 changed"
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.status, instance.desired_power_state) == ("Stopped", "stopped")  # not booted behind its back
    assert instance.status_reason.startswith("stopped outside CloudPivot (KubeVirt: Stopped)")
    gone = Instance.objects.get(pk=other_id)
    assert gone.status == "Unknown" and f"server {other} not found in the cloud" in gone.status_reason


def test_the_vm_controller_garbage_collects_what_the_vm_still_owns(kv):
    """The fixture's own check: without the release a delete keeps nothing, so the test above means something."""
    kv.put(
        VMS,
        NS,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "plain"},
            "spec": {
                "runStrategy": "Halted",
                "dataVolumeTemplates": [{"metadata": {"name": "plain-root"}, "spec": {}}],
                "template": {"spec": {"domain": {}, "volumes": []}},
            },
        },
    )
    assert "plain-root" in kv.objects(DATA_VOLUMES)
    kv.call(lambda: kv.api.system("DELETE", "/apis/kubevirt.io/v1/namespaces/tasks/virtualmachines/plain"))
    assert kv.vm("plain")["metadata"]["deletionTimestamp"]
    kv.vm_deletion_finished("plain")
    assert kv.vm("plain") is None and "plain-root" not in kv.objects(DATA_VOLUMES)


# ---------------------------------------------------------------------------- refusals
def test_a_cluster_without_kubevirt_refuses_vm_instances_and_says_so(transactional_db, world, kube, token_file, api):
    make_connection(kube, token_file, world, cloud_id="plain-k8s")
    response = api("bob").post(
        "/api/v1/instances",
        {"name": "vm1", "cloud": "plain-k8s", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"},
        format="json",
    )
    assert response.status_code == 422, response.json()
    assert response.json()["message"] == "VM instances not available on this cluster"
    assert response.json()["errors"] == [{"field": "cloud", "message": "VM instances not available on this cluster"}]
    assert not Instance.objects.exists() and not Operation.objects.exists()
    capabilities = api("bob").get("/api/v1/clouds/plain-k8s/capabilities")
    assert capabilities.status_code == 200
    vm = capabilities.json()["vm_instances"]
    assert vm["available"] is False and vm["message"].startswith("VM instances not available on this cluster")

    kube.serve_kubevirt()  # KubeVirt installed: the next request is accepted
    assert api("bob").get("/api/v1/clouds/plain-k8s/capabilities").json()["vm_instances"]["available"] is True
    response = api("bob").post(
        "/api/v1/instances",
        {"name": "vm1", "cloud": "plain-k8s", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"},
        format="json",
    )
    assert response.status_code == 202, response.json()


def test_actions_kubevirt_has_no_equivalent_for_are_refused_in_words(kv, api):
    instance_id, name = create_running(api, kv, cloud="kv-ephemeral")
    vm = kv.vm(name)
    assert vm["spec"]["template"]["spec"]["volumes"] == [
        {"name": "rootdisk", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}}
    ]
    assert "dataVolumeTemplates" not in vm["spec"]
    for action, params, words in (
        ("suspend", {}, "KubeVirt has no suspend"),
        ("resize", {"flavor": "big"}, "resize is not offered on KubeVirt"),
        ("snapshot", {}, "root disk is a containerDisk"),
        ("delete", {"volumes": "purge"}, "no volumes to purge"),
    ):
        response = act(api, instance_id, action, **params)
        assert response.status_code == 422, (action, response.json())
        assert response.json()["code"] == "unsupported" and words in response.json()["message"], response.json()
    console = api("bob").get(f"/api/v1/instances/{instance_id}/console")
    assert (
        console.status_code == 422
        and console.json()["code"] == "unsupported"
        and "serial console is a live connection" in console.json()["message"]
    )
    assert Operation.objects.filter(instance_id=instance_id).count() == 1  # only the create
    assert kv.objects(VM_SNAPSHOTS) == {} and kv.virt_api_calls() == []

    stop = Worker(accepted(act(api, instance_id, "stop")))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "Halted", what="runStrategy Halted")
    kv.vm_stopped(name)
    succeeded(stop)
    response = act(api, instance_id, "reboot", type="hard")
    assert response.status_code == 409 and "restarts only a running VirtualMachine" in response.json()["message"]


def test_bad_flavors_and_images_are_4xx_naming_the_field(kv, api):
    for extra, field in (
        ({"flavor": "huge"}, "flavor"),
        ({"image": "Not An Image!"}, "image"),
    ):
        body = {"name": "vm1", "cloud": "kv-lab", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"}
        response = api("bob").post("/api/v1/instances", body | extra, format="json")
        assert response.status_code == 400, response.json()
        assert [e["field"] for e in response.json()["errors"]] == [field], response.json()
    assert (
        "flavors: big, small"
        in api("bob")
        .post(
            "/api/v1/instances",
            {"name": "vm1", "cloud": "kv-lab", "flavor": "huge", "image": "fedora"},
            format="json",
        )
        .json()["message"]
    )
    assert not Instance.objects.exists()


def test_a_size_asked_by_vcpus_and_memory_gets_the_smallest_named_flavor_that_fits(kv, api):
    body = {"name": "vm1", "cloud": "kv-lab", "image": "quay.io/containerdisks/fedora:40"}
    response = api("bob").post("/api/v1/instances", body | {"vcpus": 2, "memory_mb": 2048}, format="json")
    assert response.status_code == 202, response.json()
    instance = Instance.objects.get(pk=response.json()["instance"])
    assert (instance.flavor, instance.vcpus, instance.memory_mb) == ("big", 2, 4096)
    too_big = api("bob").post("/api/v1/instances", body | {"vcpus": 2, "memory_mb": 8192}, format="json")
    assert too_big.status_code == 400, too_big.json()  # the cloud has no such flavor: the request's fault
    assert [e["field"] for e in too_big.json()["errors"]] == ["vcpus"], too_big.json()
    assert "no VM flavor with at least 2 vCPU and 8192 MB" in too_big.json()["message"]
