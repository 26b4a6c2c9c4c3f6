"""Old import paths, kept while other branches still import from here; new code imports from the modules named.

execution.py was split (issue 14): admission → admission.py; attempts (create, start, stop,
close) → attempts.py; cancel, retry and owner change → actions.py; the lock helper →
lifecycle.py. Delete this file once nothing imports it.
"""

from tasks.services.actions import task_cancel, task_change_owner, task_retry
from tasks.services.admission import admit_all, connection_admit, task_set_waiting_reason
from tasks.services.attempts import (
    attempt_close,
    attempt_create,
    attempt_ref,
    attempt_request_stop,
    attempt_start,
    current_attempt,
    executing_attempts,
    stopped_state,
)
from tasks.services.lifecycle import lock_task_and_attempt

__all__ = [
    "admit_all",
    "attempt_close",
    "attempt_create",
    "attempt_ref",
    "attempt_request_stop",
    "attempt_start",
    "connection_admit",
    "current_attempt",
    "executing_attempts",
    "lock_task_and_attempt",
    "stopped_state",
    "task_cancel",
    "task_change_owner",
    "task_retry",
    "task_set_waiting_reason",
]
