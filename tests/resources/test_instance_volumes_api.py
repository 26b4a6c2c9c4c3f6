"""Extra data volumes asked for at create (`volumes: [{size_gb, name?}]`): checked field by field, stored on the
instance and shown with it, and counted with the root disk against max_volume_gb, in the create and in its dry run.

Flavor and image lookups go to the real development OpenStack (cp.tiny: 1 vCPU, 64 MB, a 1 GB root disk); the
jobs are only queued here (test_openstack_volumes.py makes the volumes).
"""

from __future__ import annotations

import pytest

from cloudpivot.accounts.models import Quota
from resources.models import Instance, Operation
from tests.resources.openstack_support import create

pytestmark = pytest.mark.e2e


def test_a_create_with_volumes_stores_them_and_shows_them_with_the_instance(os_world, api):
    volumes = [{"size_gb": 2, "name": "data"}, {"size_gb": 3}]
    response = create(api, volumes=volumes)
    assert response.status_code == 202, response.json()
    assert response.json()["params"]["volumes"] == [{"name": "data", "size_gb": 2}, {"name": "", "size_gb": 3}]
    instance = api("rita").get(f"/api/v1/instances/{response.json()['instance']}").json()
    assert instance["volumes"] == [{"name": "data", "size_gb": 2}, {"name": "", "size_gb": 3}]
    assert Instance.objects.get(pk=instance["id"]).volumes_gb == 5
    plain = api("rita").get(f"/api/v1/instances/{create(api, name='vm2').json()['instance']}").json()
    assert plain["volumes"] == []


@pytest.mark.parametrize(
    ("volumes", "field", "words"),
    [
        ([{"size_gb": 1}, {"size_gb": 0}], "volumes.1.size_gb", "greater than or equal to 1"),
        ([{"size_gb": "10"}], "volumes.0.size_gb", "must be a whole number"),
        ([{"size_gb": 1.5}], "volumes.0.size_gb", "must be a whole number"),
        ([{"name": "data"}], "volumes.0.size_gb", "required"),
        ([{"size_gb": 1, "name": "no spaces"}], "volumes.0.name", "letters, digits"),
        ([{"size_gb": 1, "name": "a"}, {"size_gb": 1, "name": "a"}], "volumes.1.name", "'a' is given twice"),
        ([{"size_gb": 1}] * 9, "volumes", "no more than 8"),
        ({"size_gb": 1}, "volumes", "must be a list"),
        ([10], "volumes.0", "Expected a dictionary"),
    ],
)
def test_bad_volumes_are_a_400_naming_the_volume_and_its_field(os_world, api, volumes, field, words):
    response = create(api, volumes=volumes)
    assert response.status_code == 400, response.json()
    errors = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert field in errors and words in errors[field], errors
    assert not Instance.objects.exists() and not Operation.objects.exists()


def test_volumes_count_with_the_root_disk_against_max_volume_gb(os_world, api):
    Quota.objects.create(project=os_world.world.alpha, max_volume_gb=5)
    assert create(api, volumes=[{"size_gb": 4}]).status_code == 202  # 1 GB root disk + 4
    response = create(api, name="vm2", volumes=[{"size_gb": 1}])
    assert response.status_code == 422
    data = response.json()
    assert data["message"].startswith("quota exceeded: volume GB 2/0 left"), data["message"]
    assert (data["resource"], data["asked"], data["left"], data["limit"]) == ("volume_gb", 2, 0, 5)
    Quota.objects.filter(project=os_world.world.alpha).update(max_volume_gb=7)
    response = create(api, name="vm3", volumes=[{"size_gb": 2}])
    assert response.status_code == 422 and response.json()["left"] == 2  # 1 + 2 asked, 2 left
    assert create(api, name="vm4", volumes=[{"size_gb": 1}]).status_code == 202
    assert Instance.objects.count() == 2


def test_the_dry_run_counts_the_volumes_too(os_world, api):
    Quota.objects.create(project=os_world.world.alpha, max_volume_gb=4)
    body = {"name": "fits", "cloud": "os-dev", "flavor": "cp.tiny", "image": "cp-runner-fake"}

    def verdict(**extra):
        response = api("bob").post("/api/v1/instances?dry_run=true", body | extra, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    assert verdict(volumes=[{"size_gb": 3}])["outcome"] == "starts_now"
    never = verdict(volumes=[{"size_gb": 2}, {"size_gb": 2}])
    assert never["outcome"] == "never_fits", never
    assert (never["limit"]["resource"], never["limit"]["requested"], never["limit"]["limit"]) == ("disk_gb", 5, 4)
    assert create(api, volumes=[{"size_gb": 1}]).status_code == 202  # holds 2 of 4
    held = verdict(volumes=[{"size_gb": 2}])
    assert held["outcome"] == "refused_now" and held["limit"]["available"] == 2, held
    bad = api("bob").post("/api/v1/instances?dry_run=true", body | {"volumes": [{"size_gb": 0}]}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "volumes.0.size_gb"
    assert Instance.objects.count() == 1
