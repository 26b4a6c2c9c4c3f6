"""django-q2 entry points (thin): metrics sampling, downsampling with retention, and connection health."""

from __future__ import annotations


def sample_metrics() -> str:
    from clusters.metrics.sampling import sample_all

    return str(sample_all())


def downsample_metrics() -> str:
    from clusters.metrics.downsampling import downsample_and_prune

    done = downsample_and_prune()
    return f"written {done['written']}, deleted {done['deleted']}"


def check_health() -> str:
    from clusters.health import check_all

    reports = check_all()
    failing = sorted(cloud_id for cloud_id, report in reports.items() if not report.ok)
    return f"checked {len(reports)}, failing: {', '.join(failing) or 'none'}"
