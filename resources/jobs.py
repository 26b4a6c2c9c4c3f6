"""django-q2 entry points (thin) and the helpers that enqueue them after commit."""

from __future__ import annotations

from django_q.tasks import async_task


def enqueue_operation(operation_id: str) -> None:
    async_task("resources.jobs.run_operation", operation_id, q_options={"group": "instance-operation"})


def run_operation(operation_id: str) -> str:
    from resources.services.run import operation_run

    return operation_run(operation_id=operation_id)


def refresh() -> str:
    """The schedule: observe every instance's server, and prune snapshots past retention."""
    from resources.services.refresh import instances_refresh
    from resources.services.snapshots import snapshots_prune_expired

    return f"{instances_refresh()}; pruned {snapshots_prune_expired()} expired snapshots"
