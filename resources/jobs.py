"""django-q2 entry points (thin) and the helpers that enqueue them after commit."""

from __future__ import annotations

from django_q.tasks import async_task


def enqueue_operation(operation_id: str) -> None:
    """The job's own timeout covers the Operation's budget (services.run.operation_job_timeout)."""
    from resources.services.run import operation_job_timeout

    async_task(
        "resources.jobs.run_operation",
        operation_id,
        q_options={"group": "instance-operation", "timeout": operation_job_timeout()},
    )


def run_operation(operation_id: str) -> str:
    from resources.services.run import operation_run

    return operation_run(operation_id=operation_id)


def refresh() -> str:
    """The schedule: end Operations whose worker died, observe every instance's server, prune old snapshots."""
    from resources.services.reaper import operations_reap
    from resources.services.refresh import instances_refresh
    from resources.services.snapshots import snapshots_prune_expired

    return f"{operations_reap()}; {instances_refresh()}; pruned {snapshots_prune_expired()} expired snapshots"
