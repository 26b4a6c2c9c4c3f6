"""GET /api/v1/clouds/{id}/resources/{kind} and /metrics: visibility, answers in words."""

from __future__ import annotations

import pytest

from tests.clusters.kube_api import NODES


@pytest.fixture
def with_node(kube):
    kube.put(
        NODES,
        None,
        {"metadata": {"name": "node-1"}, "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3500m"}}},
    )


def test_cloud_wide_kinds_are_for_admins_and_members_are_told_so(api, kube_connection, with_node, world):
    for user in ("alice", "bob", "rita"):
        for kind in ("nodes", "namespaces"):
            answer = api(user).get(f"/api/v1/clouds/k3s-lab/resources/{kind}")
            assert answer.status_code == 403, answer.content
            assert answer.json()["code"] == "admins_only"
            assert f"the {kind} of the k3s-lab cloud are cloud-wide" in answer.json()["message"]
    world.alice.is_staff = True
    world.alice.save()
    answer = api("alice").get("/api/v1/clouds/k3s-lab/resources/nodes")
    assert answer.status_code == 200, answer.content
    assert answer.json()["count"] == 1
    assert answer.json()["items"][0]["allocatable"] == {"cpu": "3500m"}


def test_a_cloud_the_user_may_not_use_is_404(api, kube_connection):
    for path in ("resources/nodes", "resources/pods", "metrics"):
        answer = api("charlie").get(f"/api/v1/clouds/k3s-lab/{path}")
        assert answer.status_code == 404
    assert api(None).get("/api/v1/clouds/k3s-lab/resources/nodes").status_code in (401, 403)


def test_an_unknown_kind_is_404_with_the_kinds_there_are(api, kube_connection):
    answer = api("bob").get("/api/v1/clouds/k3s-lab/resources/flavors")
    assert answer.status_code == 404
    assert answer.json()["code"] == "not_found"
    assert "kinds: nodes, namespaces, pvcs, pods" in answer.json()["message"]


def test_the_local_cloud_has_no_inventory_and_no_metrics(api, world):
    answer = api("bob").get("/api/v1/clouds/local/resources/pods")
    assert answer.status_code == 404
    assert "no inventory for the local cloud" in answer.json()["message"]
    metrics = api("bob").get("/api/v1/clouds/local/metrics")
    assert metrics.status_code == 200 and metrics.json()["available"] is False


def test_metrics_say_clearly_when_the_cluster_serves_none(api, kube, kube_connection):
    answer = api("bob").get("/api/v1/clouds/k3s-lab/metrics")
    assert answer.status_code == 200
    assert answer.json() == {
        "cloud": "k3s-lab",
        "available": False,
        "message": answer.json()["message"],
    }
    assert "metrics API not available on this cluster" in answer.json()["message"]
    kube.configure(metrics_served=True, node_metrics=[{"name": "node-1", "usage": {"cpu": "1", "memory": "2Gi"}}])
    served = api("bob").get("/api/v1/clouds/k3s-lab/metrics").json()
    assert served["available"] is True and served["nodes"] == [] and served["pods"] == []
    assert served["nodes_hidden"] == "node figures are shown to administrators only"


def test_admins_see_node_figures(api, kube, kube_connection, world):
    kube.configure(metrics_served=True, node_metrics=[{"name": "node-1", "usage": {"cpu": "1", "memory": "2Gi"}}])
    world.alice.is_staff = True
    world.alice.save()
    served = api("alice").get("/api/v1/clouds/k3s-lab/metrics").json()
    assert served["nodes"][0]["memory"] == "2Gi"


def test_a_refusing_cloud_is_a_502_in_words(api, kube, kube_connection):
    kube.configure(permissions=set())
    answer = api("bob").get("/api/v1/clouds/k3s-lab/resources/pods")
    assert answer.status_code == 502
    assert answer.json()["code"] == "cloud_refused" and "403 Forbidden" in answer.json()["message"]


def test_readers_see_only_their_projects_claims_and_never_a_vm_disk(api, kube, kube_connection, world):
    """A claim's name tells of another project's data: members list the claims their projects may mount."""
    from tests.clusters.kube_api import PVCS

    kube_connection.projects.add(world.beta)
    for name, projects, labels in [
        ("alpha-data", "alpha", {}),
        ("beta-data", "beta", {}),
        ("shared", "*", {}),
        ("unannotated", None, {}),
        ("cp-vm-1-root", "*", {"cloudpivot.io/instance": "0f0e0d0c"}),
    ]:
        annotations = {"cloudpivot.io/projects": projects} if projects else {}
        kube.put(PVCS, "tasks", {"metadata": {"name": name, "labels": labels, "annotations": annotations}})

    def names(user: str) -> list[str]:
        answer = api(user).get("/api/v1/clouds/k3s-lab/resources/pvcs")
        assert answer.status_code == 200, answer.content
        return sorted(item["name"] for item in answer.json()["items"])

    assert names("rita") == ["alpha-data", "shared"]
    assert names("charlie") == ["beta-data", "shared"]
    world.alice.is_superuser = True
    world.alice.save()
    assert names("alice") == ["alpha-data", "beta-data", "cp-vm-1-root", "shared", "unannotated"]
    page = api("rita").get("/api/v1/clouds/k3s-lab/resources/pvcs").json()["items"][0]
    assert page["projects"] == ["alpha"] and page["instance_disk"] is False
