"""Instance requests through the API: permissions, bad input, idempotency, the state table and quotas.

Flavor and image lookups go to the real development OpenStack; the jobs are only queued here
(test_openstack_instances.py runs them), so these tests see what a request alone decides.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import close_old_connections

from cloudpivot.accounts.models import Membership, Quota, Role
from resources.models import Instance, Operation
from tasks.models import Task
from tasks.services.admission import admit_all
from tests.builders import snapshot_row
from tests.resources.openstack_support import body, create

pytestmark = pytest.mark.e2e


def test_a_create_answers_202_with_its_operation_and_a_pending_instance(os_world, api):
    response = create(api)
    assert response.status_code == 202, response.json()
    operation = response.json()
    assert operation["action"] == "create" and operation["state"] == "pending"
    assert operation["requested_by"] == "bob" and operation["project"] == "alpha"
    assert response["Location"] == f"/api/v1/operations/{operation['id']}"
    instance = api("rita").get(f"/api/v1/instances/{operation['instance']}").json()
    assert instance["status"] == "Pending" and instance["owner"] == "bob"
    assert (instance["vcpus"], instance["memory_mb"], instance["flavor"]) == (1, 64, "cp.tiny")
    assert instance["operation"]["id"] == operation["id"]
    assert [i["id"] for i in api("rita").get("/api/v1/instances").json()["results"]] == [instance["id"]]
    assert api("rita").get(f"/api/v1/operations/{operation['id']}").status_code == 200


def test_others_get_404_and_readers_cannot_act(os_world, api):
    instance_id = create(api).json()["instance"]
    assert api("charlie").get(f"/api/v1/instances/{instance_id}").status_code == 404
    assert api("charlie").get("/api/v1/instances").json()["results"] == []
    response = api("charlie").post(f"/api/v1/instances/{instance_id}/actions", {"action": "stop"}, format="json")
    assert response.status_code == 404
    response = api("rita").post(f"/api/v1/instances/{instance_id}/actions", {"action": "stop"}, format="json")
    assert response.status_code == 403 and "reader" in response.json()["message"]
    assert create(api, user="rita").status_code == 403
    assert api(None).get("/api/v1/instances").status_code in (401, 403)


@pytest.mark.parametrize(
    ("extra", "field", "status"),
    [
        ({"name": "bad name!"}, "name", 400),
        ({"flavor": "no-such-flavor"}, "flavor", 400),
        ({"image": "no-such-image"}, "image", 400),
        ({"cloud": "nowhere"}, "cloud", 400),
        ({"project": "beta"}, "project", 400),
        ({"flavor": ""}, "flavor", 400),
        ({"flavor": None, "vcpus": 1}, "memory_mb", 400),
        ({"vcpus": 1, "memory_mb": 64}, "flavor", 400),
        ({"flavor": None, "vcpus": 99, "memory_mb": 64}, "vcpus", 400),
        ({"flavor": None, "vcpus": 2, "memory_mb": 64}, "vcpus", 400),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(os_world, api, extra, field, status):
    response = create(api, **extra)
    assert response.status_code == status, response.json()
    assert field in [e["field"] for e in response.json()["errors"]], response.json()
    assert not Instance.objects.exists()


def test_vcpus_and_memory_choose_the_smallest_fitting_flavor(os_world, api):
    response = create(api, flavor=None, vcpus=1, memory_mb=32)
    assert response.status_code == 202, response.json()
    assert response.json()["params"]["flavor"] == "cp.tiny"  # cp.nohost has the same size and a larger disk
    response = create(api, flavor=None, vcpus=2, memory_mb=64)
    assert "no flavor with at least 2 vCPU and 64 MB" in response.json()["message"]


def test_the_same_idempotency_key_and_body_give_the_same_operation_another_body_409(os_world, api):
    client = api("bob")
    first = client.post("/api/v1/instances", body(), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    again = client.post("/api/v1/instances", body(), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    other = client.post("/api/v1/instances", body(name="vm2"), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == 202 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"
    # The key is the user's: alice may use the same words for her own request.
    assert api("alice").post("/api/v1/instances", body(), format="json", HTTP_IDEMPOTENCY_KEY="k1").status_code == 202
    assert Instance.objects.count() == 2


def test_a_create_over_the_instance_quota_is_refused_naming_the_limit(os_world, api):
    Quota.objects.create(project=os_world.world.alpha, max_instances=1)
    assert create(api).status_code == 202
    response = create(api, name="vm2")
    assert response.status_code == 422
    data = response.json()
    assert data["code"] == "quota_exceeded"
    assert data["message"].startswith("quota exceeded: instances 1/0 left"), data["message"]
    assert "allows 1" in data["message"] and (data["asked"], data["left"], data["limit"]) == (1, 0, 1)
    assert Instance.objects.count() == 1


def test_vcpu_and_memory_quotas_hold_too(os_world, api):
    quota = Quota.objects.create(project=os_world.world.alpha, connection=os_world.connection, max_vcpu=1)
    assert create(api).status_code == 202  # cp.tiny: 1 vCPU, 64 MB
    response = create(api, name="vm2")
    assert response.status_code == 422
    data = response.json()
    assert data["message"].startswith("quota exceeded: vCPU 1/0 left"), data["message"]
    assert (data["resource"], data["asked"], data["left"], data["errors"][0]["field"]) == ("vcpus", 1, 0, "flavor")
    quota.max_vcpu, quota.max_memory_mb = None, 100
    quota.save()
    response = create(api, name="vm3")
    assert response.status_code == 422
    data = response.json()
    assert data["message"].startswith("quota exceeded: MB memory 64/36 left"), data["message"]
    assert (data["resource"], data["asked"], data["left"], data["limit"]) == ("memory_mb", 64, 36, 100)
    assert Instance.objects.count() == 1


def test_actions_follow_the_state_table(os_world, api):
    instance_id = create(api).json()["instance"]
    url = f"/api/v1/instances/{instance_id}/actions"
    response = api("bob").post(url, {"action": "stop"}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "invalid_state"
    assert "create operation in flight" in response.json()["message"]
    Operation.objects.filter(instance_id=instance_id).update(state="failed")
    response = api("bob").post(url, {"action": "stop"}, format="json")
    assert response.status_code == 409 and "while it is Pending" in response.json()["message"]
    Instance.objects.filter(pk=instance_id).update(status="Stopped", server_id="s-1", operation=None)
    assert api("bob").post(url, {"action": "pause"}, format="json").status_code == 409
    assert api("bob").post(url, {"action": "fly"}, format="json").status_code == 400
    response = api("bob").post(url, {"action": "reboot", "type": "sideways"}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "type"
    started = api("bob").post(url, {"action": "start"}, format="json")
    assert started.status_code == 202
    # One operation at a time
    response = api("bob").post(url, {"action": "delete", "volumes": "keep"}, format="json")
    assert response.status_code == 409 and "in flight" in response.json()["message"]


def test_delete_says_what_happens_to_volumes_and_purge_is_accepted_where_the_cloud_has_cinder(os_world, api):
    instance_id = create(api).json()["instance"]
    Instance.objects.filter(pk=instance_id).update(status="Running", server_id="s-1", operation=None)
    url = f"/api/v1/instances/{instance_id}/actions"
    response = api("bob").post(url, {"action": "delete"}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "volumes"
    response = api("bob").post(url, {"action": "delete", "volumes": "purge"}, format="json")
    assert response.status_code == 202 and response.json()["params"]["block_storage"] is True


def test_a_start_retried_with_the_same_boot_id_does_nothing(os_world, api):
    instance_id = create(api).json()["instance"]
    Instance.objects.filter(pk=instance_id).update(status="Stopped", server_id="s-1", operation=None)
    url = f"/api/v1/instances/{instance_id}/actions"
    first = api("bob").post(url, {"action": "start", "boot_id": 2}, format="json")
    assert first.status_code == 202 and first.json()["params"]["boot_id"] == 2
    Operation.objects.filter(pk=first.json()["id"]).update(state="succeeded")
    Instance.objects.filter(pk=instance_id).update(status="Running", operation=None)
    retry = api("bob").post(url, {"action": "start", "boot_id": 2}, format="json")
    assert retry.status_code == 200 and retry.json()["id"] == first.json()["id"]
    assert Instance.objects.get(pk=instance_id).boot_id == 2
    assert Operation.objects.filter(action="start").count() == 1


def test_a_snapshot_is_never_restored_into_another_project(os_world, api):
    world = os_world.world
    Membership.objects.create(project=world.beta, user=world.bob, role=Role.SUBMITTER)
    beta_snapshot = snapshot_row(
        connection=os_world.connection, project=world.beta, owner=world.charlie, name="beta-snap", image_id="img-1"
    )
    instance_id = create(api).json()["instance"]
    Instance.objects.filter(pk=instance_id).update(status="Running", server_id="s-1", operation=None)
    response = api("bob").post(
        f"/api/v1/instances/{instance_id}/actions",
        {"action": "restore", "snapshot": str(beta_snapshot.pk)},
        format="json",
    )
    assert response.status_code == 403 and response.json()["code"] == "restore_other_project"
    assert "belongs to project beta" in response.json()["message"]
    response = api("bob").post(
        f"/api/v1/snapshots/{beta_snapshot.pk}/restore",
        {"name": "copy", "flavor": "cp.tiny", "project": "alpha"},
        format="json",
    )
    assert response.status_code == 403 and response.json()["code"] == "restore_other_project"
    # charlie (beta only) does not even see alpha's instance
    response = api("charlie").post(
        f"/api/v1/snapshots/{beta_snapshot.pk}/restore", {"instance": instance_id}, format="json"
    )
    assert response.status_code == 404
    assert not Operation.objects.filter(action="restore").exists()


@pytest.mark.django_db(transaction=True)
def test_parallel_creates_never_overshoot_the_instance_quota(os_world, api):
    Quota.objects.create(project=os_world.world.alpha, max_instances=3)
    results, errors = [], []

    def run(n: int) -> None:
        try:
            # A loaded development cloud may answer 503 cloud_unavailable: a client tries again, as told.
            for _ in range(5):
                status = create(api, name=f"vm{n}").status_code
                if status != 503:
                    break
                time.sleep(1)
            results.append(status)
        except Exception as exc:
            errors.append(exc)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert sorted(results) == [202] * 3 + [422] * 17
    assert Instance.objects.count() == 3


def test_a_cloud_without_instances_says_so(os_world, api):
    response = create(api, cloud="local")
    assert response.status_code == 422 and response.json()["code"] == "unsupported"
    assert response.json()["message"] == "VM instances are not available on the local cloud (local)"
    assert response.json()["errors"][0]["field"] == "cloud"


def test_owner_and_project_are_fixed_and_an_owner_change_goes_through_the_audited_service(os_world, api):
    from cloudpivot.accounts.models import AuditEntry
    from cloudpivot.exceptions import InvalidSpec
    from resources.models import ImmutableFieldChanged
    from resources.services import instance_owner_change

    world = os_world.world
    instance = Instance.objects.get(pk=create(api).json()["instance"])
    instance.project = world.beta
    with pytest.raises(ImmutableFieldChanged):
        instance.save()
    instance.refresh_from_db()
    instance.owner = world.alice
    with pytest.raises(ImmutableFieldChanged):
        instance.save()
    instance.refresh_from_db()
    with pytest.raises(InvalidSpec, match="charlie is not a member of project alpha"):
        instance_owner_change(instance=instance, new_owner=world.charlie, actor=world.alice)
    with pytest.raises(InvalidSpec, match="rita is a reader in project alpha: hand it to a submitter or admin"):
        instance_owner_change(instance=instance, new_owner=world.rita, actor=world.alice)
    instance_owner_change(instance=instance, new_owner=world.alice, actor=world.alice)
    assert Instance.objects.get(pk=instance.pk).owner == world.alice
    entry = AuditEntry.objects.get(action="resources:instance-owner-change")
    assert entry.details == {"from": "bob", "to": "alice"} and entry.actor == world.alice


def test_operations_are_listed_for_project_members_only(os_world, api):
    operation_id = create(api).json()["id"]
    assert [o["id"] for o in api("rita").get("/api/v1/operations").json()["results"]] == [operation_id]
    assert api("charlie").get("/api/v1/operations").json()["results"] == []
    assert api("charlie").get(f"/api/v1/operations/{operation_id}").status_code == 404
    assert api("bob").get("/api/v1/operations/not-a-uuid").status_code == 404


@pytest.mark.parametrize("boot_id", [2**31, 2**63])
def test_an_oversized_boot_id_is_a_400_naming_the_field(os_world, api, boot_id):
    instance_id = create(api).json()["instance"]
    Instance.objects.filter(pk=instance_id).update(status="Stopped", server_id="s-1", operation=None)
    response = api("bob").post(
        f"/api/v1/instances/{instance_id}/actions", {"action": "start", "boot_id": boot_id}, format="json"
    )
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == ["boot_id"]
    assert Instance.objects.get(pk=instance_id).boot_id == 1


def test_tasks_and_instances_share_the_vcpu_and_memory_limits(os_world, api):
    """A task on os-dev holds its flavor (cp.tiny: 1 vCPU); an instance then finds no vCPU left, and the reverse."""
    Quota.objects.create(project=os_world.world.alpha, connection=os_world.connection, max_vcpu=1)
    task = {"cloud": "os-dev", "project": "alpha", "command": ["true"]}
    first = api("bob").post("/api/v1/tasks", task, format="json").json()["id"]
    assert admit_all() == 1
    response = create(api)
    assert response.status_code == 422, response.json()
    assert response.json()["message"].startswith("quota exceeded: vCPU 1/0 left"), response.json()["message"]

    Task.objects.filter(pk=first).update(state="SUCCEEDED")  # the task's VM is gone: its vCPU is free
    assert create(api, name="vm2").status_code == 202
    second = api("bob").post("/api/v1/tasks", task, format="json").json()["id"]
    assert admit_all() == 0
    assert Task.objects.get(pk=second).state_reason == "waiting: project alpha quota on os-dev: 1/1 vCPU in use"
