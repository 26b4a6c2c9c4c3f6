"""Extra data volumes on KubeVirt: blank DataVolumes from the VM's dataVolumeTemplates, beside the root disk.

Against the loopback API server playing KubeVirt and CDI (tests/clusters/kube_kubevirt.py: its VM controller
makes the DataVolumes from the templates, owned by the VM): the VM carries one blank template per volume, of
its size and the connection's storage class, with a disk and a volume naming it; a delete keeps them (each a
kept volume of its size) or purges them, as it does the root disk.
"""

from __future__ import annotations

from cloudpivot.accounts.models import Quota
from resources.models import Instance, KeptVolume
from tests.clusters.kube_api import DATA_VOLUMES
from tests.resources.kubevirt_world import create_running, delete_keeping

VOLUMES = [{"size_gb": 2, "name": "data"}, {"size_gb": 3}]


def test_the_vm_carries_a_blank_data_volume_template_per_volume_with_its_disk(kv, api):
    instance_id, name = create_running(api, kv, volumes=VOLUMES)
    spec = kv.vm(name)["spec"]
    templates = {t["metadata"]["name"]: t for t in spec["dataVolumeTemplates"]}
    assert list(templates) == [f"{name}-root", f"{name}-datadisk0", f"{name}-datadisk1"]
    data = templates[f"{name}-datadisk0"]
    assert data["spec"] == {
        "source": {"blank": {}},
        "storage": {"resources": {"requests": {"storage": "2Gi"}}, "storageClassName": "local-path"},
    }
    assert data["metadata"]["annotations"] == {"cloudpivot.io/volume-name": "data"}
    assert data["metadata"]["labels"] == templates[f"{name}-root"]["metadata"]["labels"]
    assert templates[f"{name}-datadisk1"]["spec"]["storage"]["resources"]["requests"]["storage"] == "3Gi"
    template = spec["template"]["spec"]
    assert [d["name"] for d in template["domain"]["devices"]["disks"]][:3] == ["rootdisk", "datadisk0", "datadisk1"]
    volumes = {v["name"]: v for v in template["volumes"]}
    assert volumes["datadisk1"] == {"name": "datadisk1", "dataVolume": {"name": f"{name}-datadisk1"}}
    made = kv.objects(DATA_VOLUMES)
    assert {f"{name}-datadisk0", f"{name}-datadisk1"} <= set(made)  # the VM controller made them, owned by the VM
    assert made[f"{name}-datadisk0"]["metadata"]["ownerReferences"][0]["name"] == name
    shown = api("bob").get(f"/api/v1/instances/{instance_id}").json()
    assert shown["volumes"] == [{"name": "data", "size_gb": 2}, {"name": "", "size_gb": 3}]


def test_a_delete_keeping_volumes_keeps_the_data_volumes_each_holding_its_size(kv, api, world):
    instance_id, name = create_running(api, kv, volumes=VOLUMES)
    op = delete_keeping(api, kv, instance_id, name)
    refs = [f"datavolume/{name}-root", f"datavolume/{name}-datadisk0", f"datavolume/{name}-datadisk1"]
    assert op.result["kept"] == refs
    assert sorted(KeptVolume.objects.values_list("ref", "size_gb")) == sorted(zip(refs, [5, 2, 3], strict=True))
    assert {f"{name}-root", f"{name}-datadisk0", f"{name}-datadisk1"} <= set(kv.objects(DATA_VOLUMES))
    listed = api("bob").get("/api/v1/volumes").json()["results"]
    assert sorted((v["ref"], v["size_gb"], v["state"]) for v in listed) == sorted(
        (ref, size, "kept") for ref, size in zip(refs, [5, 2, 3], strict=True)
    )
    Quota.objects.create(project=world.alpha, max_volume_gb=15)  # 10 kept: a 5 GB root disk fits, not 5 + 1
    response = create(api, "vm2", volumes=[{"size_gb": 1}])
    assert response.status_code == 422 and response.json()["message"].startswith("quota exceeded: volume GB 6/5 left")
    assert create(api, "vm3").status_code == 202


def test_a_delete_purging_volumes_deletes_the_data_volumes_too(kv, api):
    instance_id, name = create_running(api, kv, volumes=VOLUMES[:1])
    op = delete_keeping(api, kv, instance_id, name, volumes="purge")
    assert op.result["purged"] == [f"datavolume/{name}-root", f"datavolume/{name}-datadisk0"]
    assert op.result["kept"] == []
    assert not {f"{name}-root", f"{name}-datadisk0"} & set(kv.objects(DATA_VOLUMES))
    assert not KeptVolume.objects.exists()


def test_a_connection_without_data_volume_storage_refuses_volumes_naming_the_field(kv, api):
    response = create(api, "vm1", cloud="kv-ephemeral", volumes=[{"size_gb": 1}])
    assert response.status_code == 400, response.json()
    assert response.json()["errors"] == [
        {
            "field": "volumes",
            "message": "the kv-ephemeral cloud offers no volumes to attach: its connection gives VMs no DataVolume "
            "storage (vm_root_disk is not set)",
        }
    ]
    assert not Instance.objects.exists()
    assert create(api, "vm1", cloud="kv-ephemeral").status_code == 202  # without volumes it is a containerDisk VM


def create(api, name: str, cloud: str = "kv-lab", **extra):
    body = {"name": name, "cloud": cloud, "flavor": "small", "image": "quay.io/containerdisks/fedora:40"}
    return api("bob").post("/api/v1/instances", body | extra, format="json")
