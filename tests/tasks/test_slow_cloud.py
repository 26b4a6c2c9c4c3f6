"""One slow cloud stalls nothing else (issue 16): each connection's cloud calls run in a batch of their own.

Two real Kubernetes API servers (kmock, on loopback). The slow one sits behind a TCP proxy
(tests/clusters/slow_proxy.py) that holds every request back SLOW seconds, as an API server that hangs
would. The real ticker runs; while the slow cloud is still asked for its Job, a task on the other
cluster is started and then seen running within PROMPT seconds (one connection after the other, it
waited the whole SLOW seconds). And however many passes come while a batch of the slow cloud is under
way, that connection never has a second one beside it: the proxy never holds two of its requests at once.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from django.db import connection as db_connection

from clusters.backends.kubernetes.client import KubeClient
from clusters.models import CloudConnection
from tasks.models import Attempt, Task
from tasks.services import reconcile_pass, ticker
from tasks.services.connection_work import ConnectionWorkers, batches_in_flight
from tasks.services.submission import task_submit
from tests import helpers
from tests.clusters.kube_cluster import KubeCluster
from tests.clusters.slow_proxy import SlowProxy
from tests.plugins.kube import TASK_OPTIONS, TOKEN, kube_connection_to

pytestmark = pytest.mark.django_db(transaction=True)

SLOW = 8.0  # how long the slow API server holds each request
PROMPT = SLOW / 2  # how soon the other cluster's task must be started, and then seen running


@pytest.fixture
def slow_cloud(world, token_file):
    """A second cluster, `k3s-slow`, behind the slow proxy (its delay is SLOW unless a test changes it)."""
    cluster = KubeCluster()
    cluster.configure(token=TOKEN)
    proxy = SlowProxy(cluster.url, SLOW)
    connection = kube_connection_to(
        proxy.url, token_file, world.alpha, cloud_id="k3s-slow", name="Slow cluster", options=TASK_OPTIONS
    )
    yield SimpleNamespace(cluster=cluster, proxy=proxy, connection=connection)
    proxy.delay = 0
    proxy.close()
    cluster.close()


def submit(world, cloud: str) -> Task:
    return task_submit(user=world.bob, document={"cloud": cloud, "image": "busybox", "command": ["true"]})[0]


def warm(connection: CloudConnection) -> None:
    """One call of each kind first: the client loads its API modules on first use, seconds on a busy machine."""
    client = KubeClient(connection)
    client.jobs(label_selector="warm=up")
    client.pods(what="warming up", label_selector="warm=up")


def ticker_in_a_thread(seconds: float) -> threading.Thread:
    def run() -> None:
        try:
            ticker.ticker_run(seconds=seconds)
        finally:
            db_connection.close()

    thread = threading.Thread(target=run, name="ticker", daemon=True)
    thread.start()
    return thread


def state_within(task: Task, state: str, timeout: float) -> float:
    """Seconds until the task reached `state` (polled); fails after `timeout`."""
    began = time.monotonic()
    helpers.wait_for(
        lambda: Task.objects.filter(pk=task.pk, state=state).exists(),
        timeout=timeout,
        interval=0.05,
        what=lambda: f"{task.pk} to reach {state}; it is {Task.objects.get(pk=task.pk).state}",
    )
    return time.monotonic() - began


def test_a_slow_cloud_does_not_hold_up_the_starts_and_observations_of_another(world, kube, kube_connection, slow_cloud):
    worker = ticker_in_a_thread(seconds=SLOW + 6)
    try:
        slow_task = submit(world, "k3s-slow")
        helpers.wait_for(
            lambda: ("POST", "/apis/batch/v1/namespaces/tasks/jobs") in slow_cloud.proxy.requests,
            timeout=15,
            what="the ticker to ask the slow cluster for its Job",
        )
        fast_task = submit(world, "k3s-lab")
        started = state_within(fast_task, "STARTING", timeout=3 * SLOW)
        assert started < PROMPT, f"the other cluster's task was started after {started:.1f} s"
        [job] = kube.jobs()
        kube.run(job)
        running = state_within(fast_task, "RUNNING", timeout=3 * SLOW)
        assert running < PROMPT, f"the other cluster's task was seen running after {running:.1f} s"
        # The test shows something only if the slow cluster was still being asked meanwhile.
        assert Task.objects.get(pk=slow_task.pk).state == "SUBMITTING"
        assert slow_cloud.proxy.held == 1
        slow_cloud.proxy.delay = 0  # the cloud recovers: its start ends, and nothing was asked twice
        state_within(slow_task, "STARTING", timeout=3 * SLOW)
    finally:
        worker.join(60)
    assert not worker.is_alive()
    assert slow_cloud.cluster.job_creations() == [Attempt.objects.get(task=slow_task).external_name]
    assert kube.job_creations() == [Attempt.objects.get(task=fast_task).external_name]


def test_a_connection_never_has_two_batches_in_flight(world, slow_cloud):
    slow_cloud.proxy.delay = 0
    task = submit(world, "k3s-slow")
    helpers.drive(task, {"STARTING"})
    [job] = slow_cloud.cluster.jobs()
    slow_cloud.cluster.run(job)
    helpers.drive(task, {"RUNNING"})  # from now on every batch of k3s-slow observes it: LIST requests
    slow_cloud.proxy.delay, slow_cloud.proxy.most_held = 1.5, 0
    passes, busy = 0, 0
    with ConnectionWorkers() as workers:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            busy += reconcile_pass(workers=workers).get("busy", 0)
            passes += 1
            time.sleep(0.2)
        slow_cloud.proxy.delay = 0
    assert slow_cloud.proxy.most_held == 1, "two batches of one connection asked its cloud at once"
    assert busy >= 2, f"no pass came while a batch was under way ({passes} passes): the test shows nothing"
    assert batches_in_flight() == []
