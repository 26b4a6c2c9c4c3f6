"""KubeVirt snapshots need snapshot.kubevirt.io/v1beta1 (KubeVirt >= 1.3.0) and, on 1.3 to 1.8, the Snapshot
feature gate: the capabilities, check_cloud and the snapshot/restore requests say so, read from the KubeVirt
CR the loopback cluster serves (tests/clusters/kube_fixture.py), before anything is asked of KubeVirt."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from resources.models import Operation, Snapshot
from tests.clusters.kube_api import VM_RESTORES, VM_SNAPSHOTS
from tests.resources.kubevirt_world import act, create_running


def capabilities(api) -> dict:
    response = api("bob").get("/api/v1/clouds/kv-lab/capabilities")
    assert response.status_code == 200, response.json()
    return response.json()["vm_snapshots"]


def check_cloud() -> str:
    out = io.StringIO()
    try:
        call_command("check_cloud", "kv-lab", stdout=out)
    except CommandError as exc:
        out.write(f"ERROR {exc}")
    return out.getvalue()


def test_without_the_snapshot_gate_on_kubevirt_1_5_snapshot_and_restore_are_refused_with_422(kv, api):
    instance_id, _ = create_running(api, kv)
    kv.kubevirt_cr(version="v1.5.2", feature_gates=("LiveMigration",))
    shown = capabilities(api)
    assert shown["available"] is False
    assert "need the Snapshot feature gate on KubeVirt v1.5.2 (1.3 to 1.8)" in shown["message"]
    assert "KubeVirt CR kubevirt/kubevirt" in shown["message"]

    before = Operation.objects.count()
    for action, params in (("snapshot", {}), ("restore", {"snapshot": "00000000-0000-0000-0000-000000000000"})):
        response = act(api, instance_id, action, **params)
        assert response.status_code == 422, response.json()
        body = response.json()
        assert body["code"] == "unsupported" and body["errors"][0]["field"] == "action"
        assert "Snapshot feature gate" in body["message"]
    assert Operation.objects.count() == before and Snapshot.objects.count() == 0
    assert kv.objects(VM_SNAPSHOTS) == {} and kv.objects(VM_RESTORES) == {}

    out = check_cloud()
    assert "absent  KubeVirt VM snapshots and restores (snapshot.kubevirt.io/v1beta1)" in out
    assert "Snapshot feature gate" in out
    assert "kv-lab (kubernetes): ok" in out  # optional: the cloud still passes its check


def test_kubevirt_before_1_3_has_no_snapshot_v1beta1_and_says_the_minimum(kv, api):
    instance_id, _ = create_running(api, kv)
    kv.kubevirt_cr(version="v1.2.2", feature_gates=("Snapshot",))
    shown = capabilities(api)
    assert shown["available"] is False
    assert shown["message"] == (
        "VM snapshots and restores need KubeVirt 1.3.0 or newer (snapshot.kubevirt.io/v1beta1); "
        "this cluster runs KubeVirt v1.2.2"
    )
    response = act(api, instance_id, "snapshot")
    assert response.status_code == 422 and "KubeVirt 1.3.0 or newer" in response.json()["message"]


@pytest.mark.parametrize(
    ("version", "gates", "why"),
    [("v1.9.0", (), "on by default from KubeVirt 1.9"), ("v1.3.0", ("Snapshot",), "feature gate enabled")],
)
def test_snapshots_are_available_with_the_gate_or_from_1_9(kv, api, version, gates, why):
    kv.kubevirt_cr(version=version, feature_gates=gates)
    shown = capabilities(api)
    assert shown["available"] is True and why in shown["message"]
    out = check_cloud()
    assert "ok      KubeVirt VM snapshots and restores" in out


def test_without_a_kubevirt_cr_nothing_is_concluded_and_kubevirt_is_asked(kv, api):
    """Silence concludes nothing: with no CR to read the capability is open and the snapshot is asked for."""
    instance_id, _ = create_running(api, kv)
    kv.call(lambda: kv.api.system("DELETE", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt"))
    shown = capabilities(api)
    assert shown == {
        "available": None,
        "message": "cannot tell whether KubeVirt VM snapshots work here: the cluster has no KubeVirt CR",
    }
    response = act(api, instance_id, "snapshot")
    assert response.status_code == 202, response.json()
