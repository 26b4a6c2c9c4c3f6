"""django-q2 entry points for metrics (thin): the minute's sampling pass, and downsampling with retention."""

from __future__ import annotations


def sample_metrics() -> str:
    from clusters.metrics.sampling import sample_all

    return str(sample_all())


def downsample_metrics() -> str:
    from clusters.metrics.downsampling import downsample_and_prune

    done = downsample_and_prune()
    return f"written {done['written']}, deleted {done['deleted']}"
