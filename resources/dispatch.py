"""Queuing the resources app's jobs: services call these (after commit); the jobs themselves are in
resources.jobs. Kept apart so a service that enqueues never imports the module that imports it back."""

from __future__ import annotations

from cloudpivot.queueing import enqueue
from resources.services.timing import operation_job_timeout


def enqueue_operation(operation_id: str) -> None:
    """The job's own timeout covers the Operation's budget (services.timing.operation_job_timeout)."""
    enqueue(
        "resources.jobs.run_operation",
        operation_id,
        q_options={"group": "instance-operation", "timeout": operation_job_timeout()},
    )
