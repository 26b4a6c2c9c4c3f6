"""Downsampling (15-minute and hourly averages of raw samples) and retention: exact, idempotent."""

from __future__ import annotations

import datetime as dt

import pytest

from clusters.metrics.downsampling import downsample_and_prune
from clusters.models import MetricSample

T0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)


def raw(minute: float, value: float, *, metric="queue_length", key="local", connection=None) -> MetricSample:
    return MetricSample(
        connection=connection,
        subject_kind="connection",
        subject_key=key,
        metric=metric,
        value=value,
        resolution=0,
        timestamp=T0 + dt.timedelta(minutes=minute),
    )


def series(resolution: int, metric="queue_length", key="local") -> list[tuple[dt.datetime, float]]:
    rows = MetricSample.objects.filter(resolution=resolution, metric=metric, subject_key=key).order_by("timestamp")
    return list(rows.values_list("timestamp", "value"))


@pytest.fixture
def samples(world):
    # 0..89 minutes: the value is the minute, so each bucket's average is its middle; a second series beside it
    MetricSample.objects.bulk_create(
        [raw(m, m, connection=world.local) for m in range(90)]
        + [raw(m, 100.0, metric="tasks_running", connection=world.local) for m in range(0, 90, 5)]
    )


def test_complete_buckets_are_averaged_and_a_rerun_changes_nothing(samples):
    now = T0 + dt.timedelta(minutes=95)  # buckets 10:00 … 11:15 are complete; 11:30 is not
    done = downsample_and_prune(now)
    quarter = series(900)
    assert [t for t, _ in quarter] == [T0 + dt.timedelta(minutes=15 * i) for i in range(6)]
    assert [v for _, v in quarter] == [7.0, 22.0, 37.0, 52.0, 67.0, 82.0]
    assert series(3600) == [(T0, 29.5)]  # the 11:00 hour is not complete yet
    assert [v for _, v in series(900, metric="tasks_running")] == [100.0] * 6
    assert done["written"] == {900: 12, 3600: 2}

    before = list(MetricSample.objects.order_by("id").values_list("id", "timestamp", "value", "resolution"))
    again = downsample_and_prune(now)
    assert again["written"] == {900: 0, 3600: 0}
    assert list(MetricSample.objects.order_by("id").values_list("id", "timestamp", "value", "resolution")) == before


def test_later_passes_add_only_the_newly_complete_buckets(samples, world):
    downsample_and_prune(T0 + dt.timedelta(minutes=50))
    assert [v for _, v in series(900)] == [7.0, 22.0, 37.0]
    MetricSample.objects.bulk_create([raw(m, m, connection=world.local) for m in range(90, 125)])
    downsample_and_prune(T0 + dt.timedelta(minutes=125))
    assert [v for _, v in series(900)] == [7.0, 22.0, 37.0, 52.0, 67.0, 82.0, 97.0, 112.0]
    assert series(3600) == [(T0, 29.5), (T0 + dt.timedelta(hours=1), 89.5)]


def test_retention_keeps_each_resolution_its_own_time(samples, settings):
    settings.METRICS_RAW_RETENTION_HOURS = 24
    settings.METRICS_15M_RETENTION_DAYS = 30
    settings.METRICS_1H_RETENTION_DAYS = 365
    downsample_and_prune(T0 + dt.timedelta(minutes=95))
    # a day later raw samples before 10:30 go; averages stay
    done = downsample_and_prune(T0 + dt.timedelta(hours=24, minutes=30))
    assert done["deleted"][0] == 30 + 6  # minutes 0..29 and the other series' 0, 5, … 25
    assert min(t for t, _ in series(0)) == T0 + dt.timedelta(minutes=30)
    assert len(series(900)) == 6  # written earlier, still kept; nothing new is complete after 11:30 (no raw)
    # 31 days later: 15-minute averages go, hourly ones stay
    downsample_and_prune(T0 + dt.timedelta(days=31))
    assert series(0) == [] and series(900) == [] and series(3600)[0] == (T0, 29.5)
    downsample_and_prune(T0 + dt.timedelta(days=367))
    assert not MetricSample.objects.exists()
