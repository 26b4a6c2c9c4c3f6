"""The cloud page's inventory tables (from the kmock cluster) and the staff's "Check now" button."""

from __future__ import annotations

import pytest

from clusters.models import CloudConnection
from tests import helpers
from tests.clusters.kube_api import NAMESPACES, NODES

pytestmark = pytest.mark.django_db
NODE = {
    "metadata": {"name": "gpu-node-7", "labels": {"node-role.kubernetes.io/worker": ""}},
    "status": {
        "capacity": {"cpu": "8", "nvidia.com/gpu": "2"},
        "allocatable": {"cpu": "7500m", "nvidia.com/gpu": "2"},
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}],
        "nodeInfo": {"kubeletVersion": "v1.31.2+k3s1"},
    },
}


def test_the_cloud_page_loads_its_inventory_after_the_page(pages, kube, kube_connection):
    page = pages("bob").get("/clouds/k3s-lab/").content.decode()
    assert 'hx-get="/clouds/k3s-lab/inventory"' in page and "placeholder" not in page


def test_the_inventory_shows_a_table_per_kind_the_cluster_offers(pages, kube, kube_connection, world):
    kube.put(NODES, None, NODE)
    kube.put(NAMESPACES, None, {"metadata": {"name": "tasks"}, "status": {"phase": "Active"}})
    world.rita.is_staff = True  # an administrator: cloud-wide kinds too
    world.rita.save()
    response = pages("rita").get("/clouds/k3s-lab/inventory")
    assert response.status_code == 200
    inventory = response.context["inventory"]
    assert [t.kind for t in inventory.tables] == ["nodes", "namespaces", "pvcs", "pods"] and not inventory.error
    nodes, namespaces, pvcs, pods = inventory.tables
    assert not namespaces.error and namespaces.rows[0][:2] == ["tasks", "Active"]
    assert not pvcs.error and not pods.error
    assert nodes.columns[:2] == ["name", "ready"] and nodes.rows[0][:2] == ["gpu-node-7", "yes"]
    content = response.content.decode()
    assert 'data-inventory="nodes"' in content and "gpu-node-7" in content
    assert "Ready=True, DiskPressure=False" in content  # a node's conditions in words, not a dict
    assert "cpu: 7500m, nvidia.com/gpu: 2" in content  # allocatable, as the cluster says it


def test_a_kind_the_cluster_refuses_shows_its_own_words_and_the_other_tables_stay(pages, kube, kube_connection, world):
    kube.put(NODES, None, NODE)
    kube.configure(permissions={("list", "", plural, "") for plural in ("nodes", "persistentvolumeclaims", "pods")})
    world.rita.is_staff = True
    world.rita.save()
    nodes, namespaces, pvcs, pods = pages("rita").get("/clouds/k3s-lab/inventory").context["inventory"].tables
    assert "may not do this (listing namespaces; 403 Forbidden)" in namespaces.error and not namespaces.rows
    assert nodes.rows[0][0] == "gpu-node-7" and not nodes.error and not pvcs.error and not pods.error


def test_a_reader_sees_what_the_api_shows_her_and_no_cloud_wide_kinds(pages, kube, kube_connection):
    kube.put(NODES, None, NODE)
    response = pages("rita").get("/clouds/k3s-lab/inventory")
    assert [t.kind for t in response.context["inventory"].tables] == ["pvcs", "pods"]
    assert "gpu-node-7" not in response.content.decode()


def test_a_cloud_that_does_not_answer_says_so_in_words(pages, world, token_file):
    endpoint = f"http://127.0.0.1:{helpers.free_port()}"
    closed = CloudConnection.objects.create(
        cloud_id="k3s-closed", backend="kubernetes", endpoint=endpoint, credentials_ref=f"token-file:{token_file}"
    )
    closed.projects.add(world.alpha)
    response = pages("bob").get("/clouds/k3s-closed/inventory")
    assert response.status_code == 200
    assert not response.context["inventory"].tables
    content = response.content.decode()
    assert f"asking the k3s-closed cloud: cannot reach the Kubernetes API at {endpoint}" in content
    assert "connection refused" in content and "MaxRetryError" not in content


def test_the_local_cloud_says_it_has_no_inventory(pages, world):
    page = pages("bob").get("/clouds/local/").content.decode()
    assert "has no inventory to show" in page and "hx-get" not in page.split('id="inventory-heading"')[1][:300]


def test_a_foreign_clouds_inventory_is_a_404(pages, kube, kube_connection):
    assert pages("charlie").get("/clouds/k3s-lab/inventory").status_code == 404


def test_only_staff_see_and_may_press_check_now(pages, world, kube, kube_connection):
    bob = pages("bob")
    assert "Check now" not in bob.get("/clouds/k3s-lab/").content.decode()
    assert bob.post("/clouds/k3s-lab/check").status_code == 403
    assert CloudConnection.objects.get(cloud_id="k3s-lab").health_status == "unknown"

    world.alice.is_staff = True
    world.alice.save()
    alice = pages("alice")
    assert "Check now" in alice.get("/clouds/k3s-lab/").content.decode()
    response = alice.post("/clouds/k3s-lab/check", follow=True)
    assert response.redirect_chain[-1][0] == "/clouds/k3s-lab/"
    content = response.content.decode()
    assert "k3s-lab answered: Kubernetes v1." in content
    assert CloudConnection.objects.get(cloud_id="k3s-lab").health_status == "ok"
    assert 'class="health health-ok"' in content
    assert alice.get("/clouds/k3s-lab/check").status_code == 405  # a check writes: POST only


def test_check_now_on_a_failing_cloud_shows_the_error(pages, world, kube, kube_connection):
    world.alice.is_staff = True
    world.alice.save()
    kube.configure(token="rotated")
    content = pages("alice").post("/clouds/k3s-lab/check", follow=True).content.decode()
    assert "k3s-lab is failing: " in content and "401 Unauthorized" in content
    assert "Failing" in content


def test_the_health_says_the_last_error_in_words_and_when_the_next_check_runs(pages, world, kube, kube_connection):
    from django.utils import timezone
    from django_q.models import Schedule

    from clusters.health import check_all

    client = pages("bob")
    assert "No scheduled check" in client.get("/clouds/k3s-lab/").content.decode()  # schedules not installed
    Schedule.objects.create(
        name="clouds-health",
        func="clusters.jobs.check_health",
        schedule_type="I",
        minutes=5,
        next_run=timezone.now() + timezone.timedelta(minutes=3, seconds=30),
    )
    kube.configure(token="rotated")
    check_all()  # what the schedule runs
    response = client.get("/clouds/k3s-lab/")
    content = response.content.decode()
    message = content[content.index("data-health-message") :].split("</p>")[0]
    assert "Last error:" in message and "401 Unauthorized" in message
    next_check = content[content.index("data-next-check") :].split("</p>")[0]
    assert "every 5 minutes" in next_check and "next check in 3" in next_check
    assert not helpers.csrf_problems(content)
    Schedule.objects.update(next_run=timezone.now() - timezone.timedelta(seconds=5))
    assert "next check due now" in client.get("/clouds/k3s-lab/").content.decode()


def test_the_cloud_pages_keep_the_csrf_token_out_of_urls(pages, world, kube, kube_connection):
    world.alice.is_staff = True
    world.alice.save()
    kube.put(NODES, None, NODE)
    alice = pages("alice")
    for url in ("/clouds/", "/clouds/k3s-lab/", "/clouds/k3s-lab/inventory", "/clouds/local/"):
        response = alice.get(url)
        assert response.status_code == 200 and not helpers.csrf_problems(response.content.decode()), url
