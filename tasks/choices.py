"""The task state machine of DESIGN §3, declared once."""

from __future__ import annotations

from django.db import models


class TaskState(models.TextChoices):
    PENDING = "PENDING", "Pending"
    SUBMITTING = "SUBMITTING", "Submitting"
    STARTING = "STARTING", "Starting"
    RUNNING = "RUNNING", "Running"
    RETRY_WAIT = "RETRY_WAIT", "Waiting to retry"
    CANCELLING = "CANCELLING", "Cancelling"
    UNKNOWN = "UNKNOWN", "Unknown"
    SUCCEEDED = "SUCCEEDED", "Succeeded"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"
    TIMED_OUT = "TIMED_OUT", "Timed out"


S = TaskState
TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED, S.TIMED_OUT})
# States in which an attempt may be executing in a cloud.
EXECUTING = frozenset({S.SUBMITTING, S.STARTING, S.RUNNING, S.CANCELLING, S.UNKNOWN})
ACTIVE = frozenset(set(S) - TERMINAL)
# States that hold quota: everything admitted and not finished (UNKNOWN may still run).
HOLDS_QUOTA = frozenset(ACTIVE - {S.PENDING})

_ENDINGS = {S.SUCCEEDED, S.FAILED, S.RETRY_WAIT, S.CANCELLING, S.UNKNOWN, S.TIMED_OUT}
TRANSITIONS: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.SUBMITTING, S.CANCELLED}),
    S.SUBMITTING: frozenset({S.STARTING, S.RUNNING} | _ENDINGS),
    # A program may finish before we ever saw it running.
    S.STARTING: frozenset({S.RUNNING} | _ENDINGS),
    S.RUNNING: frozenset(_ENDINGS),
    S.RETRY_WAIT: frozenset({S.SUBMITTING, S.CANCELLED}),
    # A program that finished by itself before the stop took effect reports its real outcome.
    S.CANCELLING: frozenset({S.CANCELLED, S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.UNKNOWN}),
    # UNKNOWN ─verified─▶ any state the facts prove.
    S.UNKNOWN: frozenset({S.STARTING, S.RUNNING, S.RETRY_WAIT, S.CANCELLING} | TERMINAL),
    # An explicit retry by a user re-admits a finished task (a new Attempt follows).
    **{state: frozenset({S.PENDING}) for state in TERMINAL},
}

STATE_BADGE = {
    S.PENDING: "grey",
    S.SUBMITTING: "blue",
    S.STARTING: "blue",
    S.RUNNING: "blue",
    S.RETRY_WAIT: "amber",
    S.CANCELLING: "amber",
    S.UNKNOWN: "purple",
    S.SUCCEEDED: "green",
    S.FAILED: "red",
    S.CANCELLED: "grey",
    S.TIMED_OUT: "red",
}


class AttemptState(models.TextChoices):
    CREATED = "created", "Created"
    STARTING = "starting", "Starting"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    LOST = "lost", "Lost"
    # Lost to the infrastructure (evicted, preempted, its host rebooted or lost): not the program's failure.
    INTERRUPTED = "interrupted", "Interrupted"


A = AttemptState
# An attempt's own life, beside its task's (DESIGN §3); `tasks.services.lifecycle.attempt_transition` is its only
# writer. STARTING → STARTING is a start claimed again after a worker gave up on it (reconcile's start claim).
# A program may be reported running before its start was recorded, or end (or be lost) before it was seen running.
ATTEMPT_TRANSITIONS: dict[str, frozenset[str]] = {
    A.CREATED: frozenset({A.STARTING, A.RUNNING, A.FINISHED, A.LOST, A.INTERRUPTED}),
    A.STARTING: frozenset({A.STARTING, A.RUNNING, A.FINISHED, A.LOST, A.INTERRUPTED}),
    A.RUNNING: frozenset({A.FINISHED, A.LOST, A.INTERRUPTED}),
    A.FINISHED: frozenset(),
    A.LOST: frozenset(),
    A.INTERRUPTED: frozenset(),
}


class OnInterrupt(models.TextChoices):
    """What a task asks for when the infrastructure interrupts its execution (`on_interrupt`)."""

    REQUEUE = "requeue", "Run it again (retries are not used up)"
    FAIL = "fail", "End the task FAILED"


# A task is requeued after this many interruptions at most, unless it says otherwise (`interrupt_limit`).
DEFAULT_INTERRUPT_LIMIT = 3
MAX_INTERRUPT_LIMIT = 20


class StopReason(models.TextChoices):
    CANCEL = "cancel", "Cancelled by a user"
    TIMEOUT = "timeout", "Timed out"


class CleanupState(models.TextChoices):
    NOT_NEEDED = "not_needed", "Not needed yet"
    PENDING = "pending", "Pending"
    DONE = "done", "Done"


# Retry backoff in seconds: 1, 2, 4, 8, 16, 30, 30 …
def retry_backoff_seconds(failed_attempts: int) -> int:
    return min(30, 2 ** max(0, failed_attempts - 1))
