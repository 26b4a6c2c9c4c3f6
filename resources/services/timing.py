"""An Operation's time limits: how long one wait may take, the whole Operation's budget, its django-q2 job's
timeout, and when a `running` Operation counts as lost (services.reaper)."""

from __future__ import annotations

from django.conf import settings


def deadline_seconds() -> float:
    return float(getattr(settings, "INSTANCE_OPERATION_DEADLINE_SECONDS", 60))


def operation_budget_seconds() -> float:
    """One Operation's whole wall time: every wait stops at this total too, whatever its own deadline.

    A snapshot or resize waits twice (2 x INSTANCE_OPERATION_DEADLINE_SECONDS), which alone could outlast
    the job; the budget keeps the whole Operation inside operation_job_timeout(). Default: the cluster's
    retry minus 45 s (75 s with the default ticker).
    """
    configured = getattr(settings, "INSTANCE_OPERATION_BUDGET_SECONDS", None)
    return float(configured) if configured else float(settings.Q_CLUSTER.get("retry", 120)) - 45


def operation_job_timeout() -> int:
    """The django-q2 timeout of an operation job: the budget plus room for the last cloud call and finish().

    django-q2 re-delivers a task still unacknowledged after the cluster's `retry` seconds, so a task timeout
    at or above `retry` would run the job twice: the timeout is kept 10 s below `retry`.
    """
    retry = int(settings.Q_CLUSTER.get("retry", 120))
    return int(min(operation_budget_seconds() + 25, retry - 10))


def operation_lost_after_seconds() -> float:
    """A `running` Operation older than this has no live worker: its job was killed (or its worker died)."""
    return operation_job_timeout() + float(getattr(settings, "INSTANCE_OPERATION_LOST_MARGIN_SECONDS", 60))


def poll_interval() -> float:
    return float(getattr(settings, "INSTANCE_POLL_SECONDS", 0.3))
