"""Reads of sampled series: one subject's metric over a time range, at the resolution that still holds it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from clusters.choices import HOUR, QUARTER_HOUR, RAW, SubjectKind
from clusters.metrics.charts import Chart
from clusters.models import CloudConnection, MetricSample

RESOLUTION_NAMES = {"raw": RAW, "15m": QUARTER_HOUR, "1h": HOUR}


@dataclass(frozen=True)
class Series:
    metric: str
    subject_kind: str
    subject_key: str
    resolution: int
    points: list[tuple[dt.datetime, float]]


def resolution_for(since: dt.datetime, now: dt.datetime) -> int:
    """The finest resolution whose retention still covers `since`."""
    if now - since <= dt.timedelta(hours=settings.METRICS_RAW_RETENTION_HOURS):
        return RAW
    if now - since <= dt.timedelta(days=settings.METRICS_15M_RETENTION_DAYS):
        return QUARTER_HOUR
    return HOUR


def series_get(
    *,
    connection: CloudConnection,
    metric: str,
    subject_kind: str = SubjectKind.CONNECTION,
    subject_key: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    resolution: int | None = None,
) -> Series:
    """Points (oldest first) of one series; the subject key defaults to the cloud id for connection figures."""
    now = timezone.now()
    until = until or now
    since = since or until - dt.timedelta(hours=24)
    resolution = resolution_for(since, now) if resolution is None else resolution
    key = connection.cloud_id if subject_key is None else subject_key
    rows = MetricSample.objects.filter(
        connection=connection,
        subject_kind=subject_kind,
        subject_key=key,
        metric=metric,
        resolution=resolution,
        timestamp__gte=since,
        timestamp__lte=until,
    ).order_by("timestamp")
    return Series(metric, subject_kind, key, resolution, list(rows.values_list("timestamp", "value")))


def subjects_sampled(*, connection: CloudConnection, subject_kind: str, since: dt.datetime) -> list[str]:
    """Keys of the subjects of one kind (e.g. node names) sampled on the connection since `since`."""
    rows = MetricSample.objects.filter(
        connection=connection, subject_kind=subject_kind, resolution=RAW, timestamp__gte=since
    )
    return sorted(set(rows.values_list("subject_key", flat=True)))


# (metric, title, unit, scale) of the connection's own charts, in page order.
CONNECTION_CHARTS = [
    ("tasks_active", "Active tasks", "tasks", 1.0),
    ("tasks_running", "Running tasks", "tasks", 1.0),
    ("queue_length", "Waiting tasks", "tasks", 1.0),
    ("queue_wait_avg_seconds", "Queue wait", "s", 1.0),
]
# Per node or instance: the first metric the cloud provides of each pair (load stands in for CPU use on `local`).
NODE_CHARTS = [
    ((("cpu_used_cores", "cores"), ("load_1m", "load, 1 min")), "CPU in use", 1.0),
    ((("memory_used_bytes", "GiB"),), "Memory in use", 2.0**30),
]
MAX_NODE_CHARTS = 4


def cloud_charts(*, connection: CloudConnection, hours: float = 24, with_nodes: bool = True) -> list[Chart]:
    """The cloud page's charts over the last `hours`: connection figures, then CPU/memory of a few nodes
    (`with_nodes`: nodes are cloud-wide, for admins; see clusters/metrics/visibility.py)."""
    now = timezone.now()
    since = now - dt.timedelta(hours=hours)
    resolution = resolution_for(since, now)
    charts = []
    for metric, title, unit, scale in CONNECTION_CHARTS:
        points = series_get(connection=connection, metric=metric, since=since, resolution=resolution).points
        if points:
            charts.append(Chart(title, unit, points, scale))
    nodes = subjects_sampled(connection=connection, subject_kind=SubjectKind.NODE, since=since) if with_nodes else []
    for node in nodes[:MAX_NODE_CHARTS]:
        charts += _subject_charts(connection, SubjectKind.NODE, node, since, resolution, suffix=f" on {node}")
    return charts


def instance_charts(*, connection: CloudConnection, server_id: str, hours: float = 24) -> list[Chart]:
    """An instance page's CPU and memory charts (the cloud's figures for its server) over the last `hours`."""
    if not server_id:
        return []
    now = timezone.now()
    since = now - dt.timedelta(hours=hours)
    return _subject_charts(connection, SubjectKind.INSTANCE, server_id, since, resolution_for(since, now))


def _subject_charts(connection, kind: str, key: str, since, resolution, suffix: str = "") -> list[Chart]:
    charts = []
    for metrics, title, scale in NODE_CHARTS:
        for metric, unit in metrics:
            got = series_get(
                connection=connection,
                metric=metric,
                subject_kind=kind,
                subject_key=key,
                since=since,
                resolution=resolution,
            )
            if got.points:
                charts.append(Chart(f"{title}{suffix}", unit, got.points, scale))
                break
    return charts
