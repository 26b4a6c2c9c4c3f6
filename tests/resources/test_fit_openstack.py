"""Will it fit? against the development OpenStack: the dry runs of a task and of an instance read the
project's compute quota and compare the flavor with the largest compute host (the fake driver's).

A project of its own with an instance quota of 0 (`full_tenant`, a fixture of tests/resources/conftest.py) never
fits; the flavor `cp.nohost` (more disk than any host: up.sh) never fits; `cp.tiny` in the admin project starts now.
"""

from __future__ import annotations

import pytest

from cloudpivot.accounts.models import Quota
from clusters.models import CloudConnection
from resources.choices import InstanceStatus
from resources.models import Instance, Operation
from tasks.models import Task

pytestmark = pytest.mark.e2e


def instance_dry_run(api, body):
    response = api("bob").post("/api/v1/instances?dry_run=true", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def task_dry_run(api, body):
    response = api("bob").post("/api/v1/tasks?dry_run=true", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_flavor_that_fits_starts_now_and_nothing_is_made(api, os_world):
    body = {"name": "fits", "cloud": "os-dev", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    assert instance_dry_run(api, body)["outcome"] == "starts_now"
    assert task_dry_run(api, {"cloud": "os-dev", "command": ["true"]})["outcome"] == "starts_now"
    assert not Instance.objects.exists() and not Operation.objects.exists() and not Task.objects.exists()
    assert not list(os_world.conn.compute.servers(name="fits"))


def test_a_flavor_larger_than_any_compute_host_never_fits(api, os_world):
    body = {"name": "too-big", "cloud": "os-dev", "flavor": "cp.nohost", "image": "cp-runner-fake"}
    verdict = instance_dry_run(api, body)
    assert verdict["outcome"] == "never_fits", verdict
    limit = verdict["limit"]
    assert limit["resource"] == "disk_gb" and limit["requested"] == 5000000
    assert limit["source"] == "flavor cp.nohost vs the largest compute host"
    assert limit["limit"] < 5000000
    assert verdict["message"] == (
        f"Never fits: disk 5000000 GB > {limit['limit']} GB (flavor cp.nohost vs the largest compute host)"
    )
    # A task on a connection whose flavor is cp.nohost: the same verdict.
    os_world.connection.options = {**os_world.connection.options, "flavor": "cp.nohost"}
    os_world.connection.save()
    assert task_dry_run(api, {"cloud": "os-dev", "command": ["true"]})["message"] == verdict["message"]
    assert not Instance.objects.exists() and not Task.objects.exists()


def test_a_project_quota_of_zero_never_fits(api, world, full_tenant):
    connection = CloudConnection.objects.create(
        cloud_id="os-full",
        backend="openstack",
        credentials_ref=full_tenant.clouds_yaml,
        options={"cloud": "full", "networks": "none", "flavor": "cp.tiny", "image": full_tenant.image},
    )
    connection.projects.add(world.alpha)
    body = {"name": "one-too-many", "cloud": "os-full", "flavor": "cp.tiny", "image": full_tenant.image}
    verdict = instance_dry_run(api, body)
    assert verdict["outcome"] == "never_fits", verdict
    assert verdict["limit"] == {
        "resource": "instances",
        "requested": 1,
        "available": 0,
        "limit": 0,
        "source": "OpenStack quota",
    }
    assert verdict["message"] == "Never fits: instances 1 > 0 (OpenStack quota)"
    # A member is not shown the compute hosts (admin-only policy): said in a note, not an error.
    assert any("compute hosts" in note for note in verdict["notes"]), verdict["notes"]
    task = task_dry_run(api, {"cloud": "os-full", "command": ["true"]})
    assert task["outcome"] == "never_fits" and task["message"] == verdict["message"]
    assert not Instance.objects.exists() and not Task.objects.exists()


def test_a_bad_instance_request_is_still_a_400_naming_the_field(api, os_world):
    body = {"name": "x", "cloud": "os-dev", "flavor": "no-such-flavor", "image": "cp-runner-fake"}
    response = api("bob").post("/api/v1/instances?dry_run=true", body, format="json")
    assert response.status_code in (400, 404), response.content
    assert response.json()["errors"][0]["field"] == "flavor"
    response = api("bob").post("/api/v1/instances?dry_run=true", {"cloud": "os-dev"}, format="json")
    assert response.status_code == 400 and {e["field"] for e in response.json()["errors"]} >= {"name", "image"}


def test_an_instance_over_what_is_left_of_the_quota_is_refused_now_and_one_over_all_of_it_never_fits(api, os_world):
    Quota.objects.create(project=os_world.world.alpha, connection=os_world.connection, max_instances=1, max_vcpu=4)
    body = {"name": "second", "cloud": "os-dev", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    assert instance_dry_run(api, body)["outcome"] == "starts_now"
    Instance.objects.create(
        name="first",
        project=os_world.world.alpha,
        owner=os_world.world.bob,
        connection=os_world.connection,
        backend="openstack",
        flavor="cp.tiny",
        vcpus=1,
        memory_mb=64,
        image="cp-runner-fake",
        status=InstanceStatus.RUNNING,
        server_id="not-a-real-server",
    )
    verdict = instance_dry_run(api, body)
    assert verdict["outcome"] == "refused_now"
    assert verdict["message"] == "Refused now: instances 1 asked, 0 left of 1 (project alpha's quota on os-dev)"
    Quota.objects.filter(project=os_world.world.alpha).update(max_instances=None, max_vcpu=0)
    verdict = instance_dry_run(api, body)
    assert verdict["message"] == "Never fits: CPU 1 > 0 (project alpha's quota on os-dev)"
    assert Instance.objects.count() == 1 and not Operation.objects.exists()
