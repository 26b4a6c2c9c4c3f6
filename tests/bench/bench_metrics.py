"""Metrics benchmark (issue 8): `make bench BENCH_ARGS="-k metrics"`.

Prints, with 10,000 tasks (2,000 of them holding quota) and 100,000 raw samples in the database:
1. /metrics render time (p50/p95), in process and through the view (Django's test client, no network);
2. one sampling pass (platform figures + the local cloud);
3. the first downsampling pass over all 100,000 samples, and a rerun (nothing new to do).
Asserts nothing about time.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
import uuid

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from cloudpivot.accounts.models import Quota
from clusters.metrics.downsampling import downsample_and_prune
from clusters.metrics.prometheus import render
from clusters.metrics.sampling import sample_all
from clusters.models import MetricSample
from tasks.models import Task
from tasks.services.submission import task_submit
from tests.builders import hello_spec

pytestmark = [pytest.mark.django_db]
TASKS, SAMPLES = 10_000, 100_000
STATES = ["PENDING"] * 1 + ["RUNNING"] * 2 + ["SUCCEEDED"] * 6 + ["FAILED"] * 1


def seed(world) -> None:
    template, _ = task_submit(user=world.bob, document=hello_spec(resources={"cpu": 2, "memory_mb": 512}))
    batch = [
        Task(
            id=uuid.uuid4(),
            project=world.alpha if i % 2 else world.beta,
            owner=world.bob if i % 2 else world.charlie,
            connection=world.local,
            backend="local",
            name=f"seeded {i}",
            spec=template.spec,
            spec_sha256=template.spec_sha256,
            normalized=template.normalized,
            state=STATES[i % len(STATES)],
        )
        for i in range(TASKS - 1)
    ]
    Task.objects.bulk_create(batch, batch_size=5000)
    Quota.objects.create(project=world.alpha, max_tasks=5000, max_vcpu=20000)
    Quota.objects.create(project=world.beta, connection=world.local, max_tasks=5000)
    # 100,000 raw samples: 70 series (connection, node and project figures) once a minute for ~24 h
    now = timezone.now()
    series = [("connection", "local", f"m{i}") for i in range(30)] + [("node", f"node-{i}", "cpu") for i in range(40)]
    rows = [
        MetricSample(
            connection=world.local,
            subject_kind=kind,
            subject_key=key,
            metric=metric,
            value=float(minute % 17),
            resolution=0,
            timestamp=now - dt.timedelta(minutes=minute),
        )
        for minute in range(SAMPLES // len(series) + 1)
        for kind, key, metric in series
    ][:SAMPLES]
    MetricSample.objects.bulk_create(rows, batch_size=5000)


def timed(fn, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def test_metrics_figures(world, settings):
    started = time.perf_counter()
    seed(world)
    print(f"\nseeded {Task.objects.count()} tasks, {MetricSample.objects.count()} samples "
          f"in {time.perf_counter() - started:.1f} s")  # fmt: skip

    body = render().decode()
    families = {f.name for f in text_string_to_metric_families(body)}
    assert "cloudpivot_tasks" in families  # a real answer, not an empty one
    p50, p95 = timed(render, 20)
    print(f"/metrics render (collector, in process): p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
          f"{len(body)} bytes, {len(families)} families")  # fmt: skip

    settings.METRICS_TOKEN = "bench-token"
    client = Client(headers={"Authorization": "Bearer bench-token"})
    assert client.get("/metrics").status_code == 200
    p50, p95 = timed(lambda: client.get("/metrics"), 20)
    print(f"/metrics through the view: p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms")

    p50, p95 = timed(sample_all, 5)
    print(f"sampling pass (platform + local cloud): p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms")

    started = time.perf_counter()
    done = downsample_and_prune()
    print(f"first downsampling pass over {SAMPLES} raw samples: {time.perf_counter() - started:.2f} s, "
          f"written {done['written']}")  # fmt: skip
    started = time.perf_counter()
    again = downsample_and_prune()
    print(f"downsampling rerun: {(time.perf_counter() - started) * 1000:.1f} ms, written {again['written']}")
