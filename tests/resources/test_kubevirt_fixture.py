"""What the loopback server does for KubeVirt, proven with the real `kubernetes` client over HTTP.

The KubeVirt backend is only tested against behaviour shown here, and each piece is what KubeVirt's
virt-api, VM controller, restore webhook and the garbage collector do on a real cluster.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.clusters.kube_api import DATA_VOLUMES, VM_RESTORES
from tests.plugins.kube import TOKEN

NS = "tasks"


@pytest.fixture
def client(kube):
    cfg = k8s.Configuration()
    cfg.host = kube.url
    cfg.api_key = {"BearerToken": TOKEN}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return k8s.ApiClient(cfg)


def vm(name: str, run_strategy: str = "Always", data_volume: bool = False) -> dict:
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {"runStrategy": run_strategy, "template": {"spec": {"domain": {}, "volumes": []}}},
    }
    if data_volume:
        body["spec"]["dataVolumeTemplates"] = [{"metadata": {"name": f"{name}-root"}, "spec": {"storage": {}}}]
    return body


def put(client: k8s.ApiClient, path: str, body: dict | None = None) -> int:
    method, url, headers, data, post = client.param_serialize(
        method="PUT",
        resource_path=path,
        header_params={"Content-Type": "application/json"},
        body=body or {},
        auth_settings=["BearerToken"],
    )
    response = client.call_api(method, url, header_params=headers, body=data, post_params=post)
    response.read()
    if response.status >= 300:
        raise ApiException(http_resp=response)
    return response.status


def virt_api(client, plural: str, name: str, verb: str, body: dict | None = None) -> int:
    return put(client, f"/apis/subresources.kubevirt.io/v1/namespaces/{NS}/{plural}/{name}/{verb}", body)


def refused(call) -> tuple[int, str]:
    with pytest.raises(ApiException) as error:
        call()
    return error.value.status, json.loads(error.value.body)["message"]


def test_without_kubevirt_its_groups_are_not_discovered_and_answer_404(kube, client):
    groups = [g.name for g in k8s.ApisApi(client).get_api_versions().groups]
    assert "batch" in groups and "kubevirt.io" not in groups
    custom = k8s.CustomObjectsApi(client)
    status, _ = refused(lambda: custom.list_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines"))
    assert status == 404
    status, _ = refused(
        lambda: custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm("a"))
    )
    assert status == 404 and kube.vm("a") is None

    kube.serve_kubevirt()
    groups = {g.name: g for g in k8s.ApisApi(client).get_api_versions().groups}
    assert {"kubevirt.io", "snapshot.kubevirt.io", "subresources.kubevirt.io", "cdi.kubevirt.io"} <= set(groups)
    assert groups["snapshot.kubevirt.io"].preferred_version.version == "v1beta1"
    assert custom.list_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines")["items"] == []


def test_the_vm_controller_adds_its_finalizer_and_owned_data_volumes(kube, client):
    kube.serve_kubevirt()
    custom = k8s.CustomObjectsApi(client)
    custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm("a", data_volume=True))
    stored = kube.vm("a")
    assert stored["metadata"]["uid"] and stored["metadata"]["creationTimestamp"]
    assert stored["metadata"]["finalizers"] == ["kubevirt.io/virtualMachineControllerFinalize"]
    dv = kube.objects(DATA_VOLUMES)["a-root"]
    assert dv["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]
    custom.delete_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", "a")
    assert kube.vm("a")["metadata"]["deletionTimestamp"], "the finalizer holds the VM"
    kube.vm_deletion_finished("a")
    assert kube.vm("a") is None and "a-root" not in kube.objects(DATA_VOLUMES)


def test_restart_writes_state_change_requests_and_refuses_what_virt_api_refuses(kube, client):
    kube.serve_kubevirt()
    custom = k8s.CustomObjectsApi(client)
    custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm("a"))
    assert refused(lambda: virt_api(client, "virtualmachines", "a", "restart")) == (409, "VM is not running")
    assert refused(lambda: virt_api(client, "virtualmachines", "nope", "restart"))[0] == 404
    vmi = kube.vm_running("a")
    assert virt_api(client, "virtualmachines", "a", "restart") == 202
    assert kube.vm("a")["status"]["stateChangeRequests"] == [
        {"action": "Stop", "uid": vmi["metadata"]["uid"]},
        {"action": "Start"},
    ]
    assert kube.vmi("a") is not None  # a soft restart leaves the VMI to the controller
    virt_api(client, "virtualmachines", "a", "restart", {"gracePeriodSeconds": 0})
    assert kube.vmi("a") is None  # a forced one kills it at once

    custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm("h", "Halted"))
    status, message = refused(lambda: virt_api(client, "virtualmachines", "h", "restart"))
    assert (status, message) == (409, "RunStrategy Halted does not support manual restart requests")


def test_pause_and_unpause_refuse_a_vmi_in_the_wrong_state(kube, client):
    kube.serve_kubevirt()
    k8s.CustomObjectsApi(client).create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm("a"))
    assert refused(lambda: virt_api(client, "virtualmachineinstances", "a", "pause"))[0] == 404
    kube.vm_running("a")
    assert refused(lambda: virt_api(client, "virtualmachineinstances", "a", "unpause")) == (409, "VMI is not paused")
    virt_api(client, "virtualmachineinstances", "a", "pause")
    kube.vm_paused("a")
    assert refused(lambda: virt_api(client, "virtualmachineinstances", "a", "pause")) == (409, "VMI is already paused")
    virt_api(client, "virtualmachineinstances", "a", "unpause")
    assert [call[2] for call in kube.virt_api_calls()] == ["pause", "unpause"]


def test_the_restore_webhook_refuses_a_vm_that_is_not_stopped(kube, client):
    kube.serve_kubevirt()
    custom = k8s.CustomObjectsApi(client)
    custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm("a"))
    restore = {
        "apiVersion": "snapshot.kubevirt.io/v1beta1",
        "kind": "VirtualMachineRestore",
        "metadata": {"name": "r1"},
        "spec": {
            "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "a"},
            "virtualMachineSnapshotName": "s",
        },
    }

    def create():
        return custom.create_namespaced_custom_object(
            "snapshot.kubevirt.io", "v1beta1", NS, "virtualmachinerestores", restore
        )

    status, message = refused(create)
    assert status == 422 and message.endswith('VirtualMachine "a" is not stopped')
    custom.patch_namespaced_custom_object(
        "kubevirt.io", "v1", NS, "virtualmachines", "a", {"spec": {"runStrategy": "Halted"}}
    )
    create()
    assert kube.objects(VM_RESTORES)["r1"]["metadata"]["uid"]


def release(custom, name: str) -> None:
    custom.patch_namespaced_custom_object(
        "cdi.kubevirt.io", "v1beta1", NS, "datavolumes", name, {"metadata": {"ownerReferences": None}}
    )


def test_the_vm_controller_re_adopts_an_unowned_data_volume_its_template_names_until_the_vm_is_deleted(kube, client):
    kube.serve_kubevirt()
    custom = k8s.CustomObjectsApi(client)
    body = vm("a", data_volume=True)
    body["spec"]["template"]["spec"]["volumes"] = [{"name": "root", "dataVolume": {"name": "a-root"}}]
    custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", body)
    uid = kube.vm("a")["metadata"]["uid"]
    release(custom, "a-root")  # released, then re-adopted by the controller's next sync
    assert [ref["uid"] for ref in kube.objects(DATA_VOLUMES)["a-root"]["metadata"]["ownerReferences"]] == [uid]

    custom.delete_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", "a")  # Background
    assert kube.vm("a")["metadata"]["deletionTimestamp"]
    release(custom, "a-root")  # the VM is being deleted: no adoption any more
    assert not kube.objects(DATA_VOLUMES)["a-root"]["metadata"].get("ownerReferences")


def test_deleting_a_vm_with_orphan_propagation_keeps_its_data_volumes_and_background_does_not(kube, client):
    kube.serve_kubevirt()
    custom = k8s.CustomObjectsApi(client)
    for name in ("a", "b"):
        custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm(name, data_volume=True))
    custom.delete_namespaced_custom_object(
        "kubevirt.io", "v1", NS, "virtualmachines", "a", body={"propagationPolicy": "Orphan"}
    )
    assert not kube.objects(DATA_VOLUMES)["a-root"]["metadata"].get("ownerReferences"), "orphaned at once"
    custom.delete_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", "b")
    assert kube.vm_delete_policies() == [("a", "Orphan"), ("b", "Background")]
    kube.vm_deletion_finished("a")
    kube.vm_deletion_finished("b")
    assert kube.vm("a") is None and kube.vm("b") is None
    assert set(kube.objects(DATA_VOLUMES)) == {"a-root"}


def test_a_guest_shutdown_is_undone_by_run_strategy_always_and_kept_by_rerun_on_failure(kube, client):
    kube.serve_kubevirt()
    custom = k8s.CustomObjectsApi(client)
    custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm("always"))
    custom.create_namespaced_custom_object("kubevirt.io", "v1", NS, "virtualmachines", vm("rerun", "RerunOnFailure"))
    first = kube.vm_running("always")["metadata"]["uid"]
    kube.vm_running("rerun")
    kube.guest_shutdown("always")
    assert kube.vm("always")["status"]["printableStatus"] == "Running"
    assert kube.vmi("always")["metadata"]["uid"] != first, "a new VMI: the guest was booted again"
    kube.guest_shutdown("rerun")
    assert kube.vm("rerun")["status"]["printableStatus"] == "Stopped"
    assert kube.vmi("rerun")["status"]["phase"] == "Succeeded"


def test_the_kubevirt_cr_is_readable_cluster_wide_once_written(kube, client):
    kube.serve_kubevirt()
    custom = k8s.CustomObjectsApi(client)
    assert custom.list_cluster_custom_object("kubevirt.io", "v1", "kubevirts")["items"] == []
    kube.kubevirt_cr(version="v1.4.0", feature_gates=())
    (cr,) = custom.list_cluster_custom_object("kubevirt.io", "v1", "kubevirts")["items"]
    assert cr["status"]["observedKubeVirtVersion"] == "v1.4.0"
    assert cr["spec"]["configuration"]["developerConfiguration"]["featureGates"] == []
