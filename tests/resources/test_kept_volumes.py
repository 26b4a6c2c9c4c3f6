"""Kept volumes on KubeVirt: listed per project, holding volume quota, reclaimed only once nothing uses them.

Through the API, against the loopback API server playing KubeVirt and CDI (tests/clusters/kube_kubevirt.py):
a delete with volumes=keep leaves the VM's DataVolume; a VirtualMachineInstance that mounts it (a guest running
on the disk) makes a reclaim a 409, at the request and again in the job (it may appear in between); once
nothing uses it the reclaim deletes the DataVolume and the cluster shows it gone.
"""

from __future__ import annotations

from cloudpivot.accounts.models import AuditEntry, Quota
from orphans.models import OrphanFinding
from orphans.scan import orphans_scan
from resources.models import KeptVolume
from tests.clusters.kube_api import DATA_VOLUMES
from tests.resources.kubevirt_world import (
    Worker,
    create_running,
    delete_keeping,
    guest_on,
    operation,
    succeeded,
)


def reclaim(api, volume_id: str, user: str = "bob"):
    return api(user).post(f"/api/v1/volumes/{volume_id}/reclaim", format="json")


def test_a_kept_disk_is_listed_holds_volume_quota_and_is_reclaimed_only_once_nothing_uses_it(kv, api, world):
    Quota.objects.create(project=world.alpha, max_volume_gb=5)
    instance_id, name = create_running(api, kv)
    disk = f"{name}-root"
    op = delete_keeping(api, kv, instance_id, name)
    assert op.result["kept"] == [f"datavolume/{disk}"]
    orphans_scan(connections=[KeptVolume.objects.get().connection])
    assert not OrphanFinding.objects.filter(ref=disk).exists()  # kept on purpose: listed below, not an orphan

    listed = api("rita").get("/api/v1/volumes").json()["results"]
    assert [(v["ref"], v["size_gb"], v["state"], v["instance"], v["project"], v["cloud"]) for v in listed] == [
        (f"datavolume/{disk}", 5, "kept", instance_id, "alpha", "kv-lab")
    ]
    volume_id = listed[0]["id"]
    assert api("charlie").get("/api/v1/volumes").json()["results"] == []  # beta's member sees none of alpha's
    assert api("charlie").get(f"/api/v1/volumes/{volume_id}").status_code == 404

    # the deleted instance holds nothing, its kept disk holds its 5 GB: a new 5 GB disk does not fit
    again = api("bob").post(
        "/api/v1/instances",
        {"name": "vm2", "cloud": "kv-lab", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"},
        format="json",
    )
    assert again.status_code == 422 and again.json()["message"].startswith("quota exceeded: volume GB 5/0 left")

    assert reclaim(api, volume_id, user="rita").status_code == 403  # readers read
    vmi_path = guest_on(kv, disk)
    refused = reclaim(api, volume_id)
    assert refused.status_code == 409, refused.json()
    assert refused.json()["code"] == "volume_in_use"
    assert refused.json()["message"] == (
        f"datavolume/{disk} is still used by VirtualMachineInstance someone-elses-vm: a volume is reclaimed only "
        "once nothing writes to it; delete or change those first"
    )
    assert disk in kv.objects(DATA_VOLUMES)

    kv.call(lambda: kv.api.system("DELETE", vmi_path))  # that guest is gone
    response = reclaim(api, volume_id)
    assert response.status_code == 202, response.json()
    assert response.json()["action"] == "volume_reclaim" and response.json()["instance"] == instance_id
    assert api("bob").get(f"/api/v1/volumes/{volume_id}").json()["state"] == "reclaiming"
    assert reclaim(api, volume_id).status_code == 409  # one reclaim at a time
    done = succeeded(Worker(response.json()["id"]))
    assert done.result["reclaimed"] == "deleted" and done.result["size_gb"] == 5
    assert disk not in kv.objects(DATA_VOLUMES)
    assert api("bob").get("/api/v1/volumes").json()["results"] == []
    shown = api("bob").get("/api/v1/volumes?state=reclaimed").json()["results"]
    assert [(v["id"], v["state"]) for v in shown] == [(volume_id, "reclaimed")]
    entry = AuditEntry.objects.get(action="resources:volume-reclaimed")
    assert entry.actor_name == "bob" and entry.details["ref"] == f"datavolume/{disk}"
    assert AuditEntry.objects.filter(path=f"/api/v1/volumes/{volume_id}/reclaim", status_code=202).exists()
    assert reclaim(api, volume_id).status_code == 409  # reclaimed already

    again = api("bob").post(
        "/api/v1/instances",
        {"name": "vm2", "cloud": "kv-lab", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"},
        format="json",
    )
    assert again.status_code == 202, again.json()  # the 5 GB are free again


def test_a_guest_that_mounts_the_disk_after_the_request_makes_the_reclaim_fail_and_deletes_nothing(kv, api):
    instance_id, name = create_running(api, kv)
    disk = f"{name}-root"
    delete_keeping(api, kv, instance_id, name)
    volume = KeptVolume.objects.get(ref=f"datavolume/{disk}")
    response = reclaim(api, str(volume.pk))
    assert response.status_code == 202, response.json()
    guest_on(kv, disk, vmi="late-vm")  # between the request's check and the job
    assert Worker(response.json()["id"]).join().startswith("failed")
    op = operation(response.json()["id"])
    assert op.error_kind == "volume_in_use", op.error_message
    assert "VirtualMachineInstance late-vm" in op.error_message
    assert disk in kv.objects(DATA_VOLUMES)
    assert api("bob").get(f"/api/v1/volumes/{volume.pk}").json()["state"] == "kept"


def test_delete_purging_volumes_deletes_the_data_volume_once_the_vm_is_gone(kv, api):
    instance_id, name = create_running(api, kv)
    op = delete_keeping(api, kv, instance_id, name, volumes="purge")
    assert op.result["purged"] == [f"datavolume/{name}-root"] and op.result["kept"] == []
    assert f"{name}-root" not in kv.objects(DATA_VOLUMES)
    assert kv.vm_delete_policies() == [(name, "Orphan")]  # the disk went by CloudPivot's delete, after the VM
    assert not KeptVolume.objects.exists()
    assert api("bob").get(f"/api/v1/instances/{instance_id}").json()["status"] == "Deleted"


def test_bad_filters_are_a_400_naming_the_parameter(api):
    state = api("bob").get("/api/v1/volumes?state=lost")
    assert state.status_code == 400 and "state" in str(state.json())
    project = api("bob").get("/api/v1/volumes", {"project": "al\x00pha"})
    assert project.status_code == 400 and "project" in str(project.json()), project.content
    assert api("bob").get("/api/v1/volumes?project=nobody").json()["results"] == []
