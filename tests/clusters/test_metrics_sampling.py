"""The sampling pass: platform figures from the database, each cloud's own figures, one cloud's failure its own.

Clouds are real servers on loopback: the kmock Kubernetes API (tests/clusters/kube_fixture.py), this host
for `local`, and sockets that refuse or never answer for the failing ones.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import time

import pytest
from django.utils import timezone

from cloudpivot.accounts.models import Quota
from clusters.backends.local_metrics import meminfo_bytes
from clusters.metrics.sampling import sample_all
from clusters.models import MetricSample
from tasks.models import Task
from tests import helpers
from tests.builders import admit, running, submit
from tests.clusters.kube_api import NODES
from tests.plugins.kube import kube_connection_to


def latest(metric: str, *, kind: str = "connection", key: str = "local", connection=None) -> float:
    rows = MetricSample.objects.filter(metric=metric, subject_kind=kind, subject_key=key, resolution=0)
    if connection is not None:
        rows = rows.filter(connection=connection)
    row = rows.order_by("-timestamp", "-id").first()
    assert row is not None, f"no {kind}:{key} {metric} sample; have {sorted(set(rows.values_list('metric')))}"
    return row.value


def test_platform_figures_tasks_queue_attempts_and_quota(world):
    Quota.objects.create(project=world.alpha, max_tasks=5, max_vcpu=4)
    running(world.bob)  # RUNNING, attempt live
    waited = submit(world.bob)
    Task.objects.filter(pk=waited.pk).update(created_at=timezone.now() - dt.timedelta(seconds=30))
    admit(waited)  # SUBMITTING after 30 s in the queue
    queued = submit(world.charlie)
    Task.objects.filter(pk=queued.pk).update(created_at=timezone.now() - dt.timedelta(seconds=90))

    result = sample_all()

    assert result.clouds_ok == ["local"] and not result.clouds_failed
    assert latest("tasks_running") == 1 and latest("tasks_submitting") == 1 and latest("tasks_pending") == 1
    assert latest("tasks_active") == 3
    assert latest("queue_length") == 1
    assert 90 <= latest("queue_oldest_seconds") < 120
    assert latest("active_attempts") == 2
    assert latest("tasks_admitted") == 2
    assert 30 <= latest("queue_wait_max_seconds") < 60
    assert latest("runner_heartbeats_overdue") == 0
    assert latest("quota_used_tasks", kind="project", key="alpha") == 2
    assert latest("quota_limit_tasks", kind="project", key="alpha") == 5
    assert latest("quota_limit_vcpu", kind="project", key="alpha") == 4
    # beta holds nothing (a PENDING task holds no quota) and has no quota: no rows
    assert not MetricSample.objects.filter(subject_kind="project", subject_key="beta").exists()
    # the local cloud's own figures: this host
    host = socket.gethostname()
    assert latest("cpu_capacity_cores", kind="node", key=host) == os.cpu_count()
    with open("/proc/meminfo") as meminfo:
        assert latest("memory_capacity_bytes", kind="node", key=host) == meminfo_bytes(meminfo.read())["MemTotal"]
    node = {"kind": "node", "key": host}
    assert 0 < latest("memory_used_bytes", **node) < latest("memory_capacity_bytes", **node)
    assert latest("cloud_figures_ok") == 1

    # the next pass counts only admissions since this one
    sample_all()
    assert latest("tasks_admitted") == 0


def test_a_silent_runner_counts_as_overdue(world, settings):
    settings.RUNNER_HEARTBEAT_SECONDS = 1
    _, attempt = running(world.bob)
    type(attempt).objects.filter(pk=attempt.pk).update(
        runner_contact_at=timezone.now() - dt.timedelta(seconds=60),
        last_heartbeat_at=timezone.now() - dt.timedelta(seconds=10),
    )
    sample_all()
    assert latest("runner_heartbeats_overdue") == 1


def test_kubernetes_nodes_capacity_then_use_once_metrics_server_answers(world, kube, kube_connection):
    kube.put(
        NODES,
        None,
        {
            "metadata": {"name": "node-1"},
            "status": {
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "7800m", "memory": "30Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    first = sample_all()
    assert "k3s-lab" in first.clouds_ok
    assert "metrics API not available on this cluster" in first.notes["k3s-lab"][0]
    node = {"kind": "node", "key": "node-1", "connection": kube_connection}
    assert latest("cpu_capacity_cores", **node) == 8
    assert latest("cpu_allocatable_cores", **node) == pytest.approx(7.8)
    assert latest("memory_allocatable_bytes", **node) == 30 * 2**30
    assert not MetricSample.objects.filter(metric="cpu_used_cores", subject_key="node-1").exists()

    kube.configure(metrics_served=True, node_metrics=[{"name": "node-1", "usage": {"cpu": "1200m", "memory": "3Gi"}}])
    second = sample_all()
    assert "k3s-lab" not in second.notes
    assert latest("cpu_used_cores", **node) == pytest.approx(1.2)
    assert latest("memory_used_bytes", **node) == 3 * 2**30


def test_a_failing_or_hung_cloud_does_not_stop_the_others(world, settings, token_file):
    settings.METRICS_CLOUD_TIMEOUT_SECONDS = 2
    refused_port = helpers.free_port()  # nothing listens there
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # accepts connections (the kernel does) but never answers
    try:
        for cloud_id, port in (("refusing", refused_port), ("hung", hung.getsockname()[1])):
            kube_connection_to(
                f"http://127.0.0.1:{port}", token_file, cloud_id=cloud_id, options={"request_timeout_seconds": 30}
            )
        started = time.monotonic()
        result = sample_all()
        took = time.monotonic() - started
    finally:
        hung.close()
    assert result.clouds_ok == ["local"]
    assert "cannot reach the Kubernetes API" in result.clouds_failed["refusing"]
    assert result.clouds_failed["hung"] == "no answer within 2 s"
    assert took < 10
    assert latest("cloud_figures_ok", key="refusing") == 0
    assert latest("cloud_figures_ok", key="hung") == 0
    assert latest("cloud_figures_ok", key="local") == 1
    assert latest("tasks_active", key="hung") == 0  # the platform's figures for it are still there


def test_the_scheduled_jobs_sample_and_downsample(world, caplog):
    from clusters import jobs

    jobs.sample_metrics()
    said = jobs.sample_metrics()
    assert "clouds ok: local" in said and MetricSample.objects.filter(metric="queue_length").count() == 2
    assert jobs.downsample_metrics().startswith("written {900: 0, 3600: 0}")  # no complete bucket yet


def test_a_cloud_without_metrics_server_is_noted_once_not_every_minute(world, kube, kube_connection, caplog):
    from clusters.metrics import sampling

    sampling._noted.clear()  # what this process has noted so far
    caplog.set_level("INFO", logger="clusters.metrics.sampling")
    for _ in range(3):
        sample_all()
    notes = [r for r in caplog.records if "metrics API not available" in r.getMessage()]
    assert len(notes) == 1
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
