"""Task services: the only code that writes tasks, attempts, events and logs.

What other apps and the job entry points use is re-exported here; the modules are
admission, attempts, actions (user actions), reconcile (+ observation, faults), ticker,
lifecycle (locks, transitions, events), logs, submission and runner_reports.
"""

from tasks.services.actions import task_cancel, task_change_owner, task_retry
from tasks.services.admission import admission_wake, admit_all
from tasks.services.attempts import attempt_cleanup, attempt_start, attempt_stop_now
from tasks.services.logs import log_append, log_read
from tasks.services.reconcile import reconcile_pass, reconcile_wake
from tasks.services.submission import task_submit
from tasks.services.ticker import ticker_run

__all__ = [
    "admission_wake",
    "admit_all",
    "attempt_cleanup",
    "attempt_start",
    "attempt_stop_now",
    "log_append",
    "log_read",
    "reconcile_pass",
    "reconcile_wake",
    "task_cancel",
    "task_change_owner",
    "task_retry",
    "task_submit",
    "ticker_run",
]
