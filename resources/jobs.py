"""django-q2 entry points: ids in, one service call each (enqueued by resources.dispatch and the schedule)."""

from __future__ import annotations

from resources.services.reaper import operations_reap
from resources.services.refresh import instances_refresh
from resources.services.run import operation_run
from resources.services.snapshots import snapshots_prune_expired


def run_operation(operation_id: str) -> str:
    return operation_run(operation_id=operation_id)


def refresh() -> str:
    """The schedule: end Operations whose worker died, observe every instance's server, prune old snapshots."""
    return f"{operations_reap()}; {instances_refresh()}; pruned {snapshots_prune_expired()} expired snapshots"
