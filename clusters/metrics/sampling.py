"""One sampling pass: the platform's figures (database) and each cloud's own (backends) into MetricSample.

Clouds are asked in parallel threads, each bounded by METRICS_CLOUD_TIMEOUT_SECONDS on top of its
client's own request timeout; a cloud that fails or is slow is logged and recorded as
`cloud_figures_ok` 0, and the others go on. The threads only talk to clouds: rows are written here.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from clusters.backends import cloud_figures
from clusters.backends.base import BackendError, CloudFigures
from clusters.choices import RAW, SubjectKind
from clusters.metrics import figures as platform
from clusters.models import CloudConnection, MetricSample
from tasks.choices import TERMINAL

logger = logging.getLogger(__name__)
# Notes (e.g. "metrics API not available") are logged once per process, not every minute.
_noted: set[tuple[str, str]] = set()
MAX_QUEUE_WAIT_WINDOW = dt.timedelta(hours=1)


@dataclass
class PassResult:
    samples: int = 0
    clouds_ok: list[str] = field(default_factory=list)
    clouds_failed: dict[str, str] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)

    def __str__(self) -> str:
        failed = "; ".join(f"{cloud}: {message}" for cloud, message in self.clouds_failed.items())
        return f"{self.samples} samples; clouds ok: {', '.join(self.clouds_ok) or '-'}" + (
            f"; failed: {failed}" if failed else ""
        )


def _sample(connection_id, kind, key, metric, value, now) -> MetricSample:
    return MetricSample(
        connection_id=connection_id,
        subject_kind=kind,
        subject_key=key,
        metric=metric,
        value=float(value),
        resolution=RAW,
        timestamp=now,
    )


def platform_samples(now: dt.datetime) -> list[MetricSample]:
    """Tasks by state, queue length/oldest/wait, live attempts, overdue Runners, quota use: from the database."""
    rows = []
    last = MetricSample.objects.filter(resolution=RAW, metric="queue_length").aggregate(t=Max("timestamp"))["t"]
    since = max(last or now - dt.timedelta(minutes=1), now - MAX_QUEUE_WAIT_WINDOW)
    waits = platform.queue_waits(since)
    for connection_id, fig in platform.connection_figures(now).items():
        admitted = waits.get(connection_id, [])
        values = {f"tasks_{state.lower()}": n for state, n in fig.tasks_by_state.items()}
        values |= {
            "tasks_active": sum(n for state, n in fig.tasks_by_state.items() if state not in TERMINAL),
            "queue_length": fig.queue_length,
            "queue_oldest_seconds": fig.queue_oldest_seconds,
            "active_attempts": fig.active_attempts,
            "runner_heartbeats_overdue": fig.heartbeats_overdue,
            "tasks_admitted": len(admitted),
        }
        if admitted:
            values["queue_wait_avg_seconds"] = sum(admitted) / len(admitted)
            values["queue_wait_max_seconds"] = max(admitted)
        rows += [
            _sample(connection_id, SubjectKind.CONNECTION, fig.cloud_id, metric, value, now)
            for metric, value in values.items()
        ]
    cloud_pk = dict(CloudConnection.objects.values_list("cloud_id", "pk"))
    for quota in platform.quota_figures():
        where = cloud_pk.get(quota.cloud_id)
        rows.append(_sample(where, SubjectKind.PROJECT, quota.project, f"quota_used_{quota.resource}", quota.used, now))
        if quota.limit is not None:
            metric = f"quota_limit_{quota.resource}"
            rows.append(_sample(where, SubjectKind.PROJECT, quota.project, metric, quota.limit, now))
    return rows


def cloud_samples(connection: CloudConnection, figures: CloudFigures, now: dt.datetime) -> list[MetricSample]:
    rows = [_sample(connection.pk, SubjectKind.CONNECTION, connection.cloud_id, "cloud_figures_ok", 1, now)]
    for metric, value in figures.connection.items():
        rows.append(_sample(connection.pk, SubjectKind.CONNECTION, connection.cloud_id, metric, value, now))
    for kind, subjects in ((SubjectKind.NODE, figures.nodes), (SubjectKind.INSTANCE, figures.instances)):
        for key, values in subjects.items():
            rows += [_sample(connection.pk, kind, key, metric, value, now) for metric, value in values.items()]
    return rows


def sample_all(now: dt.datetime | None = None) -> PassResult:
    """One pass over the platform and every cloud; each cloud's failure is its own."""
    now = now or timezone.now()
    result = PassResult()
    rows = platform_samples(now)
    connections = list(CloudConnection.objects.all())
    timeout = float(settings.METRICS_CLOUD_TIMEOUT_SECONDS)
    if connections:
        pool = ThreadPoolExecutor(max_workers=min(8, len(connections)), thread_name_prefix="metrics-cloud")
        futures = {connection.pk: pool.submit(cloud_figures, connection) for connection in connections}
        deadline = time.monotonic() + timeout
        try:
            for connection in connections:
                try:
                    figures = futures[connection.pk].result(timeout=max(0.0, deadline - time.monotonic()))
                except FutureTimeout:
                    _failed(result, rows, connection, f"no answer within {timeout:g} s", now)
                except BackendError as exc:
                    _failed(result, rows, connection, exc.message, now)
                except Exception as exc:  # one cloud's surprise must not stop the others
                    logger.exception("metrics: unexpected error sampling %s", connection.cloud_id)
                    _failed(result, rows, connection, f"{type(exc).__name__}: {exc}", now)
                else:
                    rows += cloud_samples(connection, figures, now)
                    result.clouds_ok.append(connection.cloud_id)
                    if figures.notes:
                        result.notes[connection.cloud_id] = figures.notes
                    for note in figures.notes:
                        if (connection.cloud_id, note) not in _noted:
                            _noted.add((connection.cloud_id, note))
                            logger.info("metrics: %s: %s", connection.cloud_id, note)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a hung cloud's thread ends with its client timeout
    MetricSample.objects.bulk_create(rows, batch_size=2000)
    result.samples = len(rows)
    return result


def _failed(result: PassResult, rows: list[MetricSample], connection: CloudConnection, message: str, now) -> None:
    logger.warning("metrics: cannot sample %s: %s", connection.cloud_id, message)
    result.clouds_failed[connection.cloud_id] = message
    rows.append(_sample(connection.pk, SubjectKind.CONNECTION, connection.cloud_id, "cloud_figures_ok", 0, now))
