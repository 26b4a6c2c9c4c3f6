"""django-q2 entry points: ids in, one service call, a short result for django-q2's log.

Their dotted paths (`tasks.jobs.tick` …) are stored in queued jobs and in the schedule of
cloudpivot/schedules.py, so they keep these names. Queuing them is tasks/dispatch.py's job.

`admit`, `start` and `cleanup` are no longer queued (issue 11: a `local` agent's sync and the
reconcile pass do those steps in batches); a job of that name still in the queue from before an
upgrade only wakes the reconcile pass, which does the step from the database.
"""

from __future__ import annotations

from tasks import services


def tick(seconds: float | None = None) -> str:
    return services.ticker_run(seconds=seconds)


def admit() -> str:
    services.admission_wake()
    return "admission is done by the agents' syncs and the reconcile pass; woke them"


def start(attempt_id: int) -> str:
    services.reconcile_wake()
    return f"attempt {attempt_id}: started by the reconcile pass (or its agent); woke it"


def cleanup(attempt_id: int) -> str:
    services.reconcile_wake()
    return f"attempt {attempt_id}: cleaned up by the reconcile pass (or its agent); woke it"


def stop(attempt_id: int) -> str:
    return services.attempt_stop_now(attempt_id=attempt_id)
