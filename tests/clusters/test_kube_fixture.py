"""Each semantic the fixture adds to kmock, proven with the real `kubernetes` client over HTTP.

The backend is only ever tested against what these tests show the loopback server does, and each of
these behaviours is what a real API server (with its Job controller, garbage collector and kubelet) does.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from tests.clusters.kube_api import JOBS, NAMESPACES, NODES
from tests.clusters.kube_fixture import label_selector_matches
from tests.helpers import wait_for
from tests.plugins.kube import TOKEN

NS = "tasks"


def api_for(kube, token: str | None = TOKEN) -> k8s.ApiClient:
    cfg = k8s.Configuration()
    cfg.host = kube.url
    if token:
        cfg.api_key = {"BearerToken": token}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return k8s.ApiClient(cfg)


def job(name: str, labels: dict[str, str] | None = None, **spec) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {"app": "demo"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels or {"app": "demo"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
            },
            **spec,
        },
    }


def raw(response) -> dict:
    return json.loads(response.data)


@pytest.fixture
def batch(kube):
    return k8s.BatchV1Api(api_for(kube))


@pytest.fixture
def core(kube):
    return k8s.CoreV1Api(api_for(kube))


def test_a_created_job_gets_server_set_metadata_and_a_pod_from_the_job_controller(kube, batch):
    created = batch.create_namespaced_job(NS, job("j1"))
    assert created.metadata.uid and created.metadata.creation_timestamp and created.metadata.resource_version
    assert created.spec.template.metadata.labels["job-name"] == "j1"
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": created.metadata.uid}
    pod = kube.pod("j1")
    assert pod["metadata"]["ownerReferences"][0]["uid"] == created.metadata.uid
    assert pod["status"]["phase"] == "Pending"
    assert batch.read_namespaced_job("j1", NS).status.active == 1


def test_a_duplicate_name_answers_409_already_exists_and_changes_nothing(kube, batch):
    first = batch.create_namespaced_job(NS, job("dup"))
    with pytest.raises(ApiException) as error:
        batch.create_namespaced_job(NS, job("dup", labels={"other": "x"}))
    assert error.value.status == 409
    body = json.loads(error.value.body)
    assert body["reason"] == "AlreadyExists" and body["message"] == 'jobs.batch "dup" already exists'
    assert batch.read_namespaced_job("dup", NS).metadata.uid == first.metadata.uid
    assert batch.read_namespaced_job("dup", NS).metadata.labels == {"app": "demo"}


def test_list_applies_label_selectors(kube, batch):
    batch.create_namespaced_job(NS, job("a", labels={"team": "x", "tier": "1"}))
    batch.create_namespaced_job(NS, job("b", labels={"team": "y", "tier": "1"}))
    batch.create_namespaced_job(NS, job("c", labels={"tier": "2"}))

    def names(selector: str) -> list[str]:
        return sorted(j.metadata.name for j in batch.list_namespaced_job(NS, label_selector=selector).items)

    assert names("team=x") == ["a"]
    assert names("tier==1,team!=x") == ["b"]
    assert names("team in (x, y)") == ["a", "b"]
    assert names("team notin (x)") == ["b", "c"]
    assert names("team") == ["a", "b"]
    assert names("!team") == ["c"]
    assert names("") == ["a", "b", "c"]


def test_label_selector_parsing_refuses_garbage():
    assert label_selector_matches("a=1", {"a": "1"})
    with pytest.raises(Exception, match="unable to parse"):
        label_selector_matches("a=(", {})


def test_a_deleted_job_answers_404_and_background_deletion_removes_its_pods(kube, batch):
    batch.create_namespaced_job(NS, job("gone"))
    assert kube.pod("gone")
    batch.delete_namespaced_job("gone", NS, propagation_policy="Background")
    with pytest.raises(ApiException) as error:
        batch.read_namespaced_job("gone", NS)
    assert error.value.status == 404
    with pytest.raises(ApiException) as again:
        batch.delete_namespaced_job("gone", NS, propagation_policy="Background")
    assert again.value.status == 404
    assert kube.call(lambda: kube.api.pods_of(NS, "gone")) == []


def test_a_delete_with_a_uid_precondition_spares_another_object_of_the_same_name(kube, batch):
    batch.create_namespaced_job(NS, job("same"))
    with pytest.raises(ApiException) as error:
        batch.delete_namespaced_job("same", NS, body={"preconditions": {"uid": "not-its-uid"}})
    assert error.value.status == 409 and "Precondition failed" in json.loads(error.value.body)["message"]
    uid = batch.read_namespaced_job("same", NS).metadata.uid
    batch.delete_namespaced_job("same", NS, body={"preconditions": {"uid": uid}})
    assert kube.jobs() == {}


def test_deleting_a_job_without_a_propagation_policy_orphans_its_pods(kube, batch):
    """The API's default for batch/v1 Jobs: the pods stay, as on a real cluster."""
    batch.create_namespaced_job(NS, job("orphan"))
    batch.delete_namespaced_job("orphan", NS)
    assert len(kube.call(lambda: kube.api.pods_of(NS, "orphan"))) == 1


def test_pod_status_progresses_and_the_job_controller_follows(kube, batch, core):
    batch.create_namespaced_job(NS, job("ok"))
    batch.create_namespaced_job(NS, job("bad"))
    kube.schedule("ok")
    assert core.read_namespaced_pod(kube.pod("ok")["metadata"]["name"], NS).spec.node_name == "node-1"
    kube.run("ok")
    pod = core.read_namespaced_pod(kube.pod("ok")["metadata"]["name"], NS)
    assert pod.status.phase == "Running" and pod.status.container_statuses[0].state.running
    kube.finish("ok", 0)
    kube.run("bad")
    kube.finish("bad", 3)
    ok = batch.read_namespaced_job("ok", NS).status
    assert ok.succeeded == 1 and ok.active == 0 and [c.type for c in ok.conditions] == ["Complete"]
    bad = batch.read_namespaced_job("bad", NS).status
    assert bad.failed == 1 and bad.conditions[0].type == "Failed"
    assert bad.conditions[0].reason == "BackoffLimitExceeded"
    terminated = core.read_namespaced_pod(kube.pod("bad")["metadata"]["name"], NS).status.container_statuses[0]
    assert terminated.state.terminated.exit_code == 3 and terminated.state.terminated.reason == "Error"


def test_failure_modes_look_as_on_a_real_cluster(kube, batch, core):
    for name in ("oom", "pull", "sched", "evict", "late", "lost"):
        batch.create_namespaced_job(NS, job(name, activeDeadlineSeconds=5))
    kube.run("oom")
    kube.finish("oom", 137, "OOMKilled")
    kube.image_pull_backoff("pull")
    kube.unschedulable("sched")
    kube.run("evict")
    kube.evict("evict")
    kube.run("late")
    kube.expire_deadline("late")
    kube.run("lost")
    kube.delete_pod("lost")

    def pod(name):
        return core.read_namespaced_pod(kube.pod(name)["metadata"]["name"], NS).status

    assert pod("oom").container_statuses[0].state.terminated.reason == "OOMKilled"
    assert pod("pull").container_statuses[0].state.waiting.reason == "ImagePullBackOff"
    assert pod("sched").conditions[0].reason == "Unschedulable"
    assert (pod("evict").phase, pod("evict").reason) == ("Failed", "Evicted")
    late = batch.read_namespaced_job("late", NS).status
    assert late.conditions[0].reason == "DeadlineExceeded"
    assert kube.call(lambda: kube.api.pods_of(NS, "late")) == []  # the controller deleted the running pod
    lost = batch.read_namespaced_job("lost", NS).status
    assert lost.failed == 1 and lost.conditions[0].reason == "BackoffLimitExceeded"


def test_a_watch_streams_matching_events_and_ends_at_its_timeout(kube, batch):
    events: list[tuple[str, str]] = []
    done = threading.Event()

    def watch() -> None:
        stream = k8s_watch.Watch().stream(
            k8s.BatchV1Api(api_for(kube)).list_namespaced_job, NS, label_selector="team=x", timeout_seconds=2
        )
        for event in stream:
            events.append((event["type"], event["object"].metadata.name))
        done.set()

    batch.create_namespaced_job(NS, job("before", labels={"team": "x"}))
    started = time.monotonic()
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    wait_for(lambda: ("ADDED", "before") in events, timeout=5, what="the initial ADDED event")
    batch.create_namespaced_job(NS, job("other", labels={"team": "y"}))
    batch.create_namespaced_job(NS, job("after", labels={"team": "x"}))
    batch.delete_namespaced_job("after", NS, propagation_policy="Background")
    wait_for(done.is_set, timeout=10, what="the watch to end at its timeout")
    assert time.monotonic() - started >= 1.5
    assert events[0] == ("ADDED", "before")
    assert ("ADDED", "after") in events and ("DELETED", "after") in events
    assert all(name != "other" for _, name in events)


def test_pod_logs_have_timestamps_and_since_time_has_second_precision(kube, batch, core):
    batch.create_namespaced_job(NS, job("logs"))
    pod = kube.pod("logs")["metadata"]["name"]
    kube.schedule("logs")
    with pytest.raises(ApiException) as waiting:
        core.read_namespaced_pod_log(pod, NS)
    assert waiting.value.status == 400 and "is waiting to start: ContainerCreating" in waiting.value.body
    kube.run("logs")
    kube.log("logs", "one\ntwo\n")
    plain = core.read_namespaced_pod_log(pod, NS, _preload_content=False).data
    assert plain == b"one\ntwo\n"
    stamped = core.read_namespaced_pod_log(pod, NS, timestamps=True, _preload_content=False).data.decode()
    first_stamp = stamped.split(" ", 1)[0]
    assert first_stamp.endswith("Z") and "." in first_stamp
    # sinceTime reaches the kubelet with whole seconds: a stamp inside the first line's second returns it again.
    api = api_for(kube)
    method, url, headers, body, post = api.param_serialize(
        "GET",
        f"/api/v1/namespaces/{NS}/pods/{pod}/log",
        query_params=[("timestamps", "true"), ("sinceTime", first_stamp)],
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, header_params=headers)
    response.read()
    assert response.data.decode().count("\n") == 2
    limited = core.read_namespaced_pod_log(pod, NS, limit_bytes=5, _preload_content=False).data
    assert limited == b"one\nt"


def test_a_vanished_pod_has_no_log(kube, batch, core):
    batch.create_namespaced_job(NS, job("nolog"))
    pod = kube.pod("nolog")["metadata"]["name"]
    kube.delete_pod("nolog")
    with pytest.raises(ApiException) as error:
        core.read_namespaced_pod_log(pod, NS)
    assert error.value.status == 404


def test_the_version_endpoint_answers_the_generated_client(kube):
    assert k8s.VersionApi(api_for(kube)).get_code().git_version.startswith("v1.")


def test_wrong_or_missing_credentials_answer_401(kube):
    for token in ("wrong", None):
        with pytest.raises(ApiException) as error:
            k8s.BatchV1Api(api_for(kube, token)).list_namespaced_job(NS)
        assert error.value.status == 401


def test_missing_rbac_answers_403_and_access_reviews_agree(kube, batch):
    kube.configure(permissions={("list", "batch", "jobs", "")})
    assert batch.list_namespaced_job(NS).items == []
    with pytest.raises(ApiException) as error:
        batch.create_namespaced_job(NS, job("nope"))
    assert error.value.status == 403
    assert 'cannot create resource "jobs" in API group "batch"' in json.loads(error.value.body)["message"]
    assert kube.jobs() == {}
    reviews = k8s.AuthorizationV1Api(api_for(kube))
    for verb, allowed in (("list", True), ("create", False)):
        answer = reviews.create_self_subject_access_review(
            {"spec": {"resourceAttributes": {"verb": verb, "group": "batch", "resource": "jobs", "namespace": NS}}}
        )
        assert answer.status.allowed is allowed


def test_a_job_quota_answers_403_exceeded_quota(kube, batch):
    kube.configure(job_quota=1)
    batch.create_namespaced_job(NS, job("q1"))
    with pytest.raises(ApiException) as error:
        batch.create_namespaced_job(NS, job("q2"))
    assert error.value.status == 403 and "exceeded quota" in json.loads(error.value.body)["message"]


def test_an_invalid_job_answers_422(kube, batch):
    bad = job("Bad_Name")
    bad["spec"]["template"]["spec"]["containers"][0]["image"] = ""
    with pytest.raises(ApiException) as error:
        batch.create_namespaced_job(NS, bad)
    assert error.value.status == 422
    message = json.loads(error.value.body)["message"]
    assert "metadata.name" in message and "containers[0].image" in message


def test_metrics_are_served_only_when_metrics_server_is_there(kube):
    custom = k8s.CustomObjectsApi(api_for(kube))
    with pytest.raises(ApiException) as error:
        custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
    assert error.value.status == 404
    kube.configure(metrics_served=True, node_metrics=[{"name": "node-1", "usage": {"cpu": "250m", "memory": "1Gi"}}])
    nodes = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
    assert nodes["items"][0]["usage"] == {"cpu": "250m", "memory": "1Gi"}


def test_seeded_objects_are_listed_like_created_ones(kube, core):
    kube.put(NODES, None, {"metadata": {"name": "node-1"}, "status": {"capacity": {"cpu": "4"}}})
    kube.seed([(JOBS, NS, job("seeded"))])
    assert [n.metadata.name for n in core.list_node().items] == ["node-1"]
    assert list(kube.jobs()) == ["seeded"]


def test_namespaces_are_listed_cluster_wide(kube, core):
    kube.put(NAMESPACES, None, {"metadata": {"name": NS, "labels": {"team": "ml"}}})
    listed = core.list_namespace().items
    assert [(n.metadata.name, n.metadata.labels) for n in listed] == [(NS, {"team": "ml"})]
    assert core.list_namespaced_pod(NS).items == []  # a namespaced path still reads as one
