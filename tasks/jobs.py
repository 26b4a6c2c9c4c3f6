"""django-q2 entry points: ids in, one service call, a short result for django-q2's log.

Their dotted paths (`tasks.jobs.tick` …) are stored in queued jobs and in the schedule of
cloudpivot/schedules.py, so they keep these names. Queuing them is tasks/dispatch.py's job.
"""

from __future__ import annotations

from tasks import services


def tick(seconds: float | None = None) -> str:
    return services.ticker_run(seconds=seconds)


def admit() -> str:
    return f"admitted {services.admit_all()}"


def start(attempt_id: int) -> str:
    return services.attempt_start(attempt_id=attempt_id)


def cleanup(attempt_id: int) -> str:
    return "cleaned" if services.attempt_cleanup(attempt_id=attempt_id) else "not yet (retried by the ticker)"


def stop(attempt_id: int) -> str:
    return services.attempt_stop_now(attempt_id=attempt_id)
