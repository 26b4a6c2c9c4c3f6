"""Downsampling and retention: raw samples become 15-minute and hourly averages, and old rows go.

Idempotent: each resolution resumes after its newest bucket, only complete buckets are written, and
a bucket's rows are replaced (delete, then insert) in one transaction, so a rerun changes nothing.
Both resolutions average raw samples (exact averages), so raw retention must exceed an hour.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from clusters.choices import HOUR, QUARTER_HOUR, RAW
from clusters.models import MetricSample

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def retention() -> dict[int, dt.timedelta]:
    return {
        RAW: dt.timedelta(hours=settings.METRICS_RAW_RETENTION_HOURS),
        QUARTER_HOUR: dt.timedelta(days=settings.METRICS_15M_RETENTION_DAYS),
        HOUR: dt.timedelta(days=settings.METRICS_1H_RETENTION_DAYS),
    }


def bucket_start(moment: dt.datetime, resolution: int) -> dt.datetime:
    seconds = int((moment - EPOCH).total_seconds())
    return EPOCH + dt.timedelta(seconds=seconds - seconds % resolution)


def downsample(resolution: int, now: dt.datetime | None = None) -> int:
    """Write the averages of every complete bucket not yet written; the number of rows written."""
    now = now or timezone.now()
    end = bucket_start(now, resolution)  # buckets before this one are complete
    newest = MetricSample.objects.filter(resolution=resolution).aggregate(t=Max("timestamp"))["t"]
    if newest is not None:
        start = newest + dt.timedelta(seconds=resolution)
    else:
        oldest_raw = MetricSample.objects.filter(resolution=RAW).aggregate(t=Min("timestamp"))["t"]
        if oldest_raw is None:
            return 0
        start = bucket_start(oldest_raw, resolution)
    if start >= end:
        return 0
    sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0])
    raw = MetricSample.objects.filter(resolution=RAW, timestamp__gte=start, timestamp__lt=end).order_by()
    for connection_id, kind, key, metric, value, moment in raw.values_list(
        "connection_id", "subject_kind", "subject_key", "metric", "value", "timestamp"
    ).iterator(chunk_size=5000):
        acc = sums[(connection_id, kind, key, metric, bucket_start(moment, resolution))]
        acc[0] += value
        acc[1] += 1
    rows = [
        MetricSample(
            connection_id=connection_id,
            subject_kind=kind,
            subject_key=key,
            metric=metric,
            value=total / count,
            resolution=resolution,
            timestamp=bucket,
        )
        for (connection_id, kind, key, metric, bucket), (total, count) in sums.items()
    ]
    with transaction.atomic():
        MetricSample.objects.filter(resolution=resolution, timestamp__gte=start, timestamp__lt=end).delete()
        MetricSample.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def prune(now: dt.datetime | None = None) -> dict[int, int]:
    """Delete samples older than their resolution's retention; rows deleted per resolution."""
    now = now or timezone.now()
    out = {}
    for resolution, keep in retention().items():
        out[resolution], _ = MetricSample.objects.filter(resolution=resolution, timestamp__lt=now - keep).delete()
    return out


def downsample_and_prune(now: dt.datetime | None = None) -> dict[str, object]:
    """Downsample before pruning, so raw samples are averaged before they go."""
    now = now or timezone.now()
    written = {resolution: downsample(resolution, now) for resolution in (QUARTER_HOUR, HOUR)}
    return {"written": written, "deleted": prune(now)}
