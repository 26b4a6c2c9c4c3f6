"""Task services: the only code that writes tasks, attempts, events and logs."""

from tasks.services.execution import task_cancel, task_change_owner, task_retry
from tasks.services.logs import log_append, log_read
from tasks.services.reconcile import reconcile_pass
from tasks.services.submission import task_submit

__all__ = [
    "log_append",
    "log_read",
    "reconcile_pass",
    "task_cancel",
    "task_change_owner",
    "task_retry",
    "task_submit",
]
