"""One reconcile pass over N running Kubernetes tasks: wall time, database queries, Kubernetes API calls.

Collected only by `make bench`. The tasks, attempts, Jobs and pods are seeded directly (as they stand
after start-up, each pod running with one new log line); the pass itself is the real one
(tasks.services.reconcile_pass) with the real client talking HTTP to the loopback kmock server, which
counts the requests it receives. Pass 1 copies every pod's new log line (one log request per running
pod: the pod log API has no batch read); pass 2 follows at once (logs throttled by log_interval_seconds,
nothing changed): the steady state.

It asserts the scaling claims, not times: observation costs the same two API calls whatever N is,
and the steady-state pass makes a bounded number of database queries.
"""

from __future__ import annotations

import contextlib
import time
import uuid

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cloudpivot import credentials
from clusters.backends.base import BackendError
from clusters.backends.kubernetes import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, KubernetesBackend, read_pod_log
from clusters.models import CloudConnection
from tasks.choices import AttemptState, TaskState
from tasks.models import Attempt, Task
from tasks.services import reconcile_pass
from tests.clusters.kube_api import JOBS, PODS, nano_text
from tests.clusters.kube_cluster import KubeCluster, container_status

SIZES = (10, 100, 1000)
NS = "tasks"
rows: list[tuple] = []


@pytest.fixture(scope="module", autouse=True)
def print_table():
    yield
    print("\n\nOne reconcile pass over N running Kubernetes tasks (kmock on loopback, real client)")
    header = ("N", "pass", "wall ms", "DB queries", "API calls", "of which LIST", "of which pod logs")
    print(" | ".join(f"{h:>17}" for h in header))
    for row in rows:
        print(" | ".join(f"{str(v):>17}" for v in row))


def seed(kube: KubeCluster, world, n: int) -> CloudConnection:
    token = world.tmp / "token"
    token.write_text("bench-token")
    kube.configure(token="bench-token")
    connection = CloudConnection.objects.create(
        cloud_id=f"k3s-bench-{n}",
        backend="kubernetes",
        endpoint=kube.url,
        scope=NS,
        credentials_ref=f"token-file:{token}",
        # Longer than pass 1 takes at N=1000, so pass 2 shows the throttled steady state.
        options={"log_interval_seconds": 300},
    )
    connection.projects.add(world.alpha)
    now = timezone.now()
    tasks, attempts, objects = [], [], []
    for _ in range(n):
        task = Task(
            project=world.alpha,
            owner=world.bob,
            connection=connection,
            backend="kubernetes",
            spec={},
            spec_sha256="0" * 64,
            normalized={"image": "busybox", "command": ["sleep", "600"], "resources": {"gpu": 0}},
            state=TaskState.RUNNING,
            attempts_count=1,
            started_at=now,
        )
        name = f"cp-{task.id.hex}-1"
        nonce = credentials.new_nonce()
        uid = str(uuid.uuid4())
        attempts.append(
            Attempt(
                task=task,
                number=1,
                external_name=name,
                external_ref=uid,
                credential_nonce=nonce,
                runner_token_hash=credentials.runner_credential_hash(external_name=name, nonce=nonce),
                state=AttemptState.RUNNING,
                admitted_at=now,
                cloud_created_at=now,
                program_started_at=now,
                observed_phase="running",
                observed_reason="the program is running on node node-1",
            )
        )
        tasks.append(task)
        labels = {LABEL_TASK: str(task.id), LABEL_ATTEMPT: name, LABEL_INSTALLATION: "default", "job-name": name}
        objects.append((JOBS, NS, {"metadata": {"name": name, "uid": uid, "labels": labels}, "status": {"active": 1}}))
        pod = {
            "metadata": {"name": f"{name}-abcde", "labels": labels},
            "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Running", "containerStatuses": [container_status(running=True)]},
        }
        objects.append((PODS, NS, pod))
    Task.objects.bulk_create(tasks)
    Attempt.objects.bulk_create(attempts)
    kube.seed(objects)
    moment = timezone.now()
    stamp = nano_text(moment, moment.microsecond * 1000)

    def logs() -> None:
        for _, _, obj in objects[1::2]:
            kube.api.logs[NS, obj["metadata"]["name"]] = [(0, stamp, b"working\n")]

    kube.call(logs)
    return connection


def measure(kube: KubeCluster, n: int, label: str) -> tuple:
    requests_before = kube.call(lambda: list(kube.api.client_requests))
    with CaptureQueriesContext(db_connection) as queries:
        started = time.perf_counter()
        reconcile_pass()
        wall = (time.perf_counter() - started) * 1000
    sent = kube.call(lambda: list(kube.api.client_requests))[len(requests_before) :]
    lists = sum(1 for r in sent if r.action is not None and r.action.name == "LIST")
    logs = sum(1 for r in sent if r.subresource == "log")
    row = (n, label, f"{wall:.0f}", len(queries), len(sent), lists, logs)
    rows.append(row)
    return row


@pytest.fixture(scope="module", autouse=True)
def warm_client():
    """The kubernetes 37 client builds its pydantic models on first use (seconds, once per process): not a pass cost."""
    kube = KubeCluster()
    try:
        backend = KubernetesBackend(CloudConnection(cloud_id="warm-up", backend="kubernetes", endpoint=kube.url))
        started = time.perf_counter()
        backend.health()
        backend.inventory("pods")
        with contextlib.suppress(BackendError):
            read_pod_log(backend.client, "missing", since=None, limit=1024)
        print(f"\nfirst use of the kubernetes client in this process: {(time.perf_counter() - started):.1f} s")
    finally:
        kube.close()


@pytest.fixture
def bench_world(world, tmp_path):
    world.tmp = tmp_path
    return world


@pytest.mark.django_db
@pytest.mark.parametrize("n", SIZES)
def test_one_pass_costs_two_list_calls_and_bounded_queries(bench_world, n):
    kube = KubeCluster()
    try:
        seed(kube, bench_world, n)
        first = measure(kube, n, "1: logs copied")
        second = measure(kube, n, "2: steady state")
    finally:
        kube.close()
    assert first[5] == 2 and second[5] == 2  # one LIST of Jobs, one of pods, whatever N
    assert first[6] == n  # every running pod's new line copied once
    assert second[4] == 2  # nothing else: logs are throttled, nothing changed
    assert second[3] <= 12  # database queries do not grow with N in the steady state
    assert Attempt.objects.filter(task__connection__cloud_id=f"k3s-bench-{n}", log_bytes=8).count() == n
