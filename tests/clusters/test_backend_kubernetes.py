"""The Kubernetes backend on its own: the real client over HTTP to the loopback API server."""

from __future__ import annotations

import logging

import pytest

from clusters.backends import get_backend
from clusters.backends.base import AttemptRef, BackendError
from clusters.backends.kubernetes import (
    LABEL_ATTEMPT,
    LABEL_INSTALLATION,
    LABEL_TASK,
    KubernetesBackend,
    new_log_lines,
    parse_credentials_ref,
    timestamp_ns,
)
from tests.clusters.kube_api import NODES, PVCS
from tests.clusters.kube_cluster import KubeCluster
from tests.plugins.kube import TOKEN


def ref(n: int = 1, **spec) -> AttemptRef:
    task_id = f"00000000-0000-0000-0000-{n:012d}"
    return AttemptRef(
        task_id=task_id,
        attempt_id=n,
        number=1,
        external_name=f"cp-{n:08d}-1",
        external_ref="",
        spec={"image": "busybox:1.36", "command": ["echo", "hi"], "env": {}, "resources": {"gpu": 0}, **spec},
    )


@pytest.fixture
def backend(kube_connection) -> KubernetesBackend:
    return get_backend(kube_connection)


def started(backend, attempt: AttemptRef) -> AttemptRef:
    external = backend.ensure_started(attempt)
    return AttemptRef(**{**attempt.__dict__, "external_ref": external.ref})


def test_it_is_registered_and_needs_an_image(backend):
    assert isinstance(backend, KubernetesBackend) and backend.uses_runner is False
    assert backend.validate({"command": ["true"]})[0]["field"] == "image"
    assert backend.validate({"command": ["true"], "image": "busybox"}) == []


def test_the_job_is_one_literal_run_with_our_labels_and_limits(backend, kube, kube_connection, settings):
    kube_connection.options |= {
        "node_selector": {"pool": "batch"},
        "tolerations": [{"key": "batch", "operator": "Exists", "effect": "NoSchedule"}],
        "image_pull_secrets": ["regcred"],
        "ttl_seconds_after_finished": 600,
    }
    backend = KubernetesBackend(kube_connection)
    kube.put(PVCS, "tasks", {"metadata": {"name": "data", "annotations": {"cloudpivot.io/projects": "alpha"}}})
    attempt = ref(
        project="alpha",
        command=["sh", "-c", "echo $HOME; rm -rf /"],
        env={"A": "1"},
        workdir="/work",
        timeout_seconds=90,
        stop_grace_seconds=45,
        resources={"cpu": 0.5, "memory_mb": 512, "gpu": 2},
        volumes=[{"claim": "data", "mount_path": "/data", "read_only": True}],
        node_selector={"gpu": "a100"},
        tolerations=[{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
    )
    external = backend.ensure_started(attempt)
    job = kube.jobs()[attempt.external_name]
    assert external.ref == job["metadata"]["uid"] and not external.adopted
    labels = {LABEL_TASK: attempt.task_id, LABEL_ATTEMPT: attempt.external_name, LABEL_INSTALLATION: "default"}
    assert job["metadata"]["labels"] == labels
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"]) == (0, 90, 600)
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False  # no environment variables naming the namespace's Services
    assert pod["terminationGracePeriodSeconds"] == 45  # the task's time to checkpoint after SIGTERM
    (container,) = pod["containers"]
    assert container["command"] == ["sh", "-c", "echo $HOME; rm -rf /"] and "args" not in container
    assert container["image"] == "busybox:1.36" and container["workingDir"] == "/work"
    assert container["env"] == [{"name": "A", "value": "1"}]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": "500m", "memory": "512Mi", "nvidia.com/gpu": "2"},
    }
    assert container["volumeMounts"] == [{"name": "vol-0", "mountPath": "/data", "readOnly": True}]
    assert pod["volumes"] == [{"name": "vol-0", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}}]
    assert pod["nodeSelector"] == {"pool": "batch", "gpu": "a100"}
    assert pod["tolerations"] == [
        {"operator": "Exists", "key": "batch", "effect": "NoSchedule"},
        {"operator": "Equal", "key": "gpu", "value": "yes", "effect": "NoSchedule"},
    ]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert labels.items() <= kube.pod(attempt.external_name)["metadata"]["labels"].items()


def test_starting_twice_adopts_the_same_job(backend, kube):
    attempt = ref()
    first = backend.ensure_started(attempt)
    again = backend.ensure_started(attempt)
    assert again.adopted and again.ref == first.ref
    assert list(kube.jobs()) == [attempt.external_name]


def test_observe_costs_two_calls_whatever_the_number_of_attempts(backend, kube):
    attempts = [started(backend, ref(n)) for n in range(1, 8)]
    kube.run(attempts[0].external_name)
    kube.finish(attempts[1].external_name, 0)
    before = kube.client_requests()
    observations = backend.observe(attempts)
    assert kube.client_requests() - before == 2
    assert [o.phase for o in observations[:3]] == ["running", "succeeded", "pending"]
    assert observations[2].reason == "the pod is starting"


def test_logs_are_copied_once_each_even_within_one_second(backend, kube):
    attempt = started(backend, ref())
    name = attempt.external_name
    kube.run(name)
    backend.observe([attempt])
    cursor: dict = {}
    copied = b""
    for batch in ([b"a\n", b"b\n"], [b"c\n"], [], [b"d\n", b"e"]):
        for line in batch:
            kube.log(name, line)
        pieces, cursor = backend.fetch_logs(attempt, cursor)
        copied += b"".join(p.data for p in pieces)
        assert all(p.stream == "stdout" for p in pieces)
    assert copied == b"a\nb\nc\nd\ne"
    assert cursor["pod"] == kube.pod(name)["metadata"]["name"] and cursor["skip"] == 1


def test_a_log_cut_by_the_byte_limit_is_finished_next_time(kube_connection, kube):
    kube_connection.options |= {"log_limit_bytes": 80}
    backend = KubernetesBackend(kube_connection)
    attempt = started(backend, ref())
    kube.run(attempt.external_name)
    lines = [f"line {i:03d} ".encode() + b"x" * 20 + b"\n" for i in range(10)]
    kube.log(attempt.external_name, b"".join(lines))
    backend.observe([attempt])
    cursor, copied = {}, b""
    for _ in range(20):
        pieces, cursor = backend.fetch_logs(attempt, cursor)
        copied += b"".join(p.data for p in pieces)
    assert copied == b"".join(lines)


def test_the_log_cursor_skips_lines_it_has_already_returned():
    stamp = b"2026-01-01T00:00:01.5Z"
    raw = b"2026-01-01T00:00:01Z old\n" + stamp + b" x\n" + stamp + b" y\n"
    data, cursor = new_log_lines(raw, {}, limit=10_000)
    assert data == b"old\nx\ny\n" and cursor["skip"] == 2
    again, cursor2 = new_log_lines(raw + stamp + b" z\n", cursor, limit=10_000)
    assert again == b"z\n" and cursor2["skip"] == 3
    assert (
        timestamp_ns(b"2026-01-01T00:00:01.000000001+01:00") == timestamp_ns(b"2026-01-01T00:00:01Z") - 3600 * 10**9 + 1
    )


def test_no_log_before_the_container_starts(backend, kube):
    attempt = started(backend, ref())
    kube.schedule(attempt.external_name)
    backend.observe([attempt])
    assert backend.fetch_logs(attempt, {}) == ([], {})


def test_stop_and_cleanup_are_idempotent_and_spare_foreign_jobs(backend, kube):
    attempt = started(backend, ref())
    backend.stop(attempt)
    assert kube.jobs() == {}
    backend.stop(attempt)  # already gone: success
    assert backend.cleanup(attempt) is True
    # A Job of the same name that is not ours (another UID) is left alone.
    backend.ensure_started(ref())
    stale = AttemptRef(**{**attempt.__dict__})  # remembers the old UID
    assert backend.cleanup(stale) is True
    assert list(kube.jobs()) == [attempt.external_name]


def test_keep_finished_jobs_leaves_them_to_the_ttl_controller(kube_connection, kube):
    kube_connection.options |= {"keep_finished_jobs": True}
    backend = KubernetesBackend(kube_connection)
    attempt = started(backend, ref())
    assert backend.cleanup(attempt) is True
    assert list(kube.jobs()) == [attempt.external_name]


def test_health_and_errors_are_in_words_without_the_token(kube_connection, kube, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    assert KubernetesBackend(kube_connection).health().ok
    kube.configure(token="another-token")
    health = KubernetesBackend(kube_connection).health()
    assert not health.ok and "401 Unauthorized" in health.message
    with pytest.raises(BackendError) as error:
        KubernetesBackend(kube_connection).ensure_started(ref())
    assert error.value.kind == "auth"
    assert TOKEN not in error.value.message + health.message + caplog.text


@pytest.mark.parametrize(
    ("setup", "kind", "words"),
    [
        ({"permissions": {("list", "batch", "jobs", "")}}, "auth", "may not do this (creating Job"),
        ({"job_quota": 0}, "quota", "ResourceQuota does not allow it"),
    ],
)
def test_refusals_are_classified(backend, kube, setup, kind, words):
    kube.configure(**setup)
    with pytest.raises(BackendError) as error:
        backend.ensure_started(ref())
    assert error.value.kind == kind and words in error.value.message and error.value.permanent


def test_an_invalid_job_is_an_invalid_spec(backend):
    with pytest.raises(BackendError) as error:
        backend.ensure_started(ref(image=""))
    assert error.value.kind == "invalid_spec" and "is invalid" in error.value.message


def test_an_unreachable_api_is_transient(kube_connection):
    gone = KubeCluster()
    url = gone.url
    gone.close()
    kube_connection.endpoint = url
    with pytest.raises(BackendError) as error:
        KubernetesBackend(kube_connection).observe([ref()])
    assert error.value.kind == "transient" and "cannot reach the Kubernetes API" in error.value.message


def test_credentials_from_an_env_var_or_a_kubeconfig(kube_connection, kube, monkeypatch, tmp_path):
    monkeypatch.setenv("CLOUDPIVOT_CLOUD_K3S_LAB_TOKEN", TOKEN)
    kube_connection.credentials_ref = "env:CLOUDPIVOT_CLOUD_K3S_LAB_TOKEN"
    assert KubernetesBackend(kube_connection).health().ok
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {{server: "{kube.url}"}}
- name: other
  cluster: {{server: "http://127.0.0.1:9"}}
users:
- name: runner
  user: {{token: "{TOKEN}"}}
contexts:
- name: lab
  context: {{cluster: lab, user: runner}}
- name: other
  context: {{cluster: other, user: runner}}
current-context: other
"""
    )
    kube_connection.credentials_ref = str(kubeconfig)
    kube_connection.endpoint = ""
    kube_connection.options |= {"context": "lab"}
    assert parse_credentials_ref(str(kubeconfig)) == ("kubeconfig", str(kubeconfig))
    assert KubernetesBackend(kube_connection).health().ok
    kube_connection.options |= {"context": "missing"}
    health = KubernetesBackend(kube_connection).health()
    assert not health.ok and "cannot load the Kubernetes credentials" in health.message


def test_permissions_are_checked_with_access_reviews(backend, kube):
    kube.configure(
        permissions={("create", "batch", "jobs", ""), ("list", "batch", "jobs", ""), ("list", "", "pods", "")}
    )
    results = {(r["verb"], r["group"], r["resource"]): r for r in backend.permissions()}
    assert results["create", "batch", "jobs"]["allowed"] and results["list", "", "pods"]["allowed"]
    assert not results["get", "", "pods/log"]["allowed"] and results["get", "", "pods/log"]["required"]
    assert not results["list", "metrics.k8s.io", "pods"]["allowed"]
    assert not results["list", "", "nodes"]["required"] and results["list", "", "nodes"]["namespace"] == ""


def test_inventory_and_metrics(backend, kube):
    kube.put(
        NODES,
        None,
        {
            "metadata": {"name": "node-1", "labels": {"node-role.kubernetes.io/worker": "true"}},
            "status": {
                "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
                "allocatable": {"cpu": "7800m", "memory": "30Gi"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        },
    )
    kube.put(
        PVCS,
        "tasks",
        {"metadata": {"name": "data"}, "spec": {"storageClassName": "local-path"}, "status": {"phase": "Bound"}},
    )
    attempt = started(backend, ref())
    (node,) = backend.inventory("nodes")
    assert node["ready"] and node["roles"] == ["worker"] and node["capacity"]["nvidia.com/gpu"] == "1"
    assert node["allocatable"]["cpu"] == "7800m"
    assert [p["name"] for p in backend.inventory("pvcs")] == ["data"]
    assert backend.inventory("pods")[0]["attempt"] == attempt.external_name
    with pytest.raises(BackendError) as unknown:
        backend.inventory("flavors")
    assert unknown.value.kind == "not_found"
    with pytest.raises(BackendError) as absent:
        backend.metrics()
    assert "metrics API not available on this cluster" in absent.value.message
    pod = kube.pod(attempt.external_name)["metadata"]["name"]
    kube.configure(
        metrics_served=True,
        node_metrics=[{"name": "node-1", "usage": {"cpu": "1200m", "memory": "3Gi"}}],
        pod_metrics={pod: {"cpu": "100m", "memory": "64Mi"}},
    )
    figures = backend.metrics()
    assert figures["nodes"][0]["cpu"] == "1200m"
    assert figures["pods"] == [
        {
            "name": pod,
            "attempt": attempt.external_name,
            "cpu": "100m",
            "memory": "64Mi",
            "window": "10s",
            "timestamp": figures["pods"][0]["timestamp"],
        }
    ]


def test_each_start_mounts_only_claims_the_project_may_still_use(backend, kube):
    """A retry may start long after the submission: the claim is checked again, and nothing is created."""
    kube.put(PVCS, "tasks", {"metadata": {"name": "data", "annotations": {"cloudpivot.io/projects": "beta"}}})
    attempt = ref(project="alpha", volumes=[{"claim": "data", "mount_path": "/data"}])
    with pytest.raises(BackendError) as refused:
        backend.ensure_started(attempt)
    assert refused.value.kind == "invalid_spec"
    assert refused.value.message.startswith("volumes.0.claim: project alpha may not use PersistentVolumeClaim data")
    assert attempt.external_name not in kube.jobs()
