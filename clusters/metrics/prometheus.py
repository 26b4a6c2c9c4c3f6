"""/metrics: the platform's figures in the Prometheus text format (prometheus_client, a custom collector).

The collector reads current values from the database at scrape time (a few aggregate queries), plus
the newest sampled node figures; nothing is kept in process memory, so every worker answers the same.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Iterator

from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from cloudpivot.accounts.audit import spilled_audit_entries
from clusters.choices import RAW, SubjectKind
from clusters.metrics.figures import connection_figures, quota_figures
from clusters.models import MetricSample
from tasks.choices import TaskState

logger = logging.getLogger(__name__)
# Sampled figures older than this are stale: a cloud that stopped answering shows no node figures.
SAMPLE_FRESHNESS = dt.timedelta(minutes=10)
_broker = None
_broker_lock = threading.Lock()


def _metric_name(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", text)


def _queue_figures() -> tuple[int | None, int | None]:
    """django-q2's queue size and stored failures; None where the broker cannot say cheaply."""
    global _broker
    from django_q.brokers import get_broker
    from django_q.models import Failure

    try:
        with _broker_lock:
            if _broker is None:
                _broker = get_broker()
        size = _broker.queue_size()
    except Exception as exc:  # a broker that is down must not make the whole scrape fail
        logger.warning("metrics: cannot read the job queue size: %s", exc)
        size = None
    return size, Failure.objects.count()


class PlatformCollector:
    """Collects at each scrape; `describe` is empty so that registering it does not query the database."""

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        per_connection = connection_figures(now)
        tasks = GaugeMetricFamily("cloudpivot_tasks", "Tasks by state, per connection.", labels=["connection", "state"])
        queue = GaugeMetricFamily("cloudpivot_queue_length", "Tasks waiting (PENDING).", labels=["connection"])
        oldest = GaugeMetricFamily(
            "cloudpivot_queue_oldest_age_seconds", "Age of the oldest waiting task (0: none).", labels=["connection"]
        )
        attempts = GaugeMetricFamily(
            "cloudpivot_active_attempts", "Attempts that may be executing in the cloud.", labels=["connection"]
        )
        overdue = GaugeMetricFamily(
            "cloudpivot_runner_heartbeats_overdue",
            "Live attempts whose Runner missed 3 heartbeats.",
            labels=["connection"],
        )
        for fig in per_connection.values():
            for state in TaskState.values:
                tasks.add_metric([fig.cloud_id, state], fig.tasks_by_state.get(state, 0))
            queue.add_metric([fig.cloud_id], fig.queue_length)
            oldest.add_metric([fig.cloud_id], fig.queue_oldest_seconds)
            attempts.add_metric([fig.cloud_id], fig.active_attempts)
            overdue.add_metric([fig.cloud_id], fig.heartbeats_overdue)
        yield from (tasks, queue, oldest, attempts, overdue)

        labels = ["project", "connection", "resource"]
        used = GaugeMetricFamily("cloudpivot_quota_used", "What admitted, unfinished tasks hold.", labels=labels)
        limit = GaugeMetricFamily("cloudpivot_quota_limit", "The quota's limit (absent: none).", labels=labels)
        for quota in quota_figures():
            where = [quota.project, quota.cloud_id, quota.resource]  # connection "": the project-wide quota
            used.add_metric(where, quota.used)
            if quota.limit is not None:
                limit.add_metric(where, quota.limit)
        yield from (used, limit)

        size, failures = _queue_figures()
        if size is not None:
            yield GaugeMetricFamily("cloudpivot_jobs_queued", "Background jobs waiting in django-q2's queue.", size)
        yield GaugeMetricFamily("cloudpivot_jobs_failed", "Failed background jobs django-q2 keeps.", failures)
        yield GaugeMetricFamily(
            "cloudpivot_audit_spilled_entries",
            "Audit entries the database did not take, waiting in the spill file (docs/audit.md).",
            spilled_audit_entries(),
        )
        yield from self._sampled(now)

    def _sampled(self, now: dt.datetime) -> Iterator[Metric]:
        """The newest raw sample of each node figure, and whether each cloud answered the last sampling pass."""
        fresh = MetricSample.objects.filter(
            resolution=RAW, timestamp__gte=now - SAMPLE_FRESHNESS, subject_kind=SubjectKind.NODE
        ).order_by("timestamp", "id")
        newest: dict[tuple[str, str, str], tuple[float, dt.datetime]] = {}
        for cloud_id, node, metric, value, moment in fresh.values_list(
            "connection__cloud_id", "subject_key", "metric", "value", "timestamp"
        ):
            newest[(metric, cloud_id or "", node)] = (value, moment)
        families: dict[str, GaugeMetricFamily] = {}
        for (metric, cloud_id, node), (value, _) in sorted(newest.items()):
            name = f"cloudpivot_node_{_metric_name(metric)}"
            if name not in families:
                families[name] = GaugeMetricFamily(
                    name, f"Sampled node figure {metric}.", labels=["connection", "node"]
                )
            families[name].add_metric([cloud_id, node], value)
        yield from families.values()

        ok = GaugeMetricFamily(
            "cloudpivot_cloud_sampling_ok", "1 when the cloud answered the last sampling pass.", labels=["connection"]
        )
        last = GaugeMetricFamily(
            "cloudpivot_cloud_last_sample_timestamp_seconds", "When the cloud was last sampled.", labels=["connection"]
        )
        answers = MetricSample.objects.filter(
            resolution=RAW, timestamp__gte=now - SAMPLE_FRESHNESS, metric="cloud_figures_ok"
        ).order_by("timestamp", "id")
        rows = answers.values_list("connection__cloud_id", "value", "timestamp")
        latest = {cloud_id: (value, moment) for cloud_id, value, moment in rows}
        for cloud_id, (value, moment) in sorted(latest.items()):
            ok.add_metric([cloud_id], value)
            last.add_metric([cloud_id], moment.timestamp())
        yield from (ok, last)


registry = CollectorRegistry(auto_describe=False)
registry.register(PlatformCollector())


def render() -> bytes:
    return generate_latest(registry)
