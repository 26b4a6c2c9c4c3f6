"""What follows an execution the infrastructure interrupted (evicted, preempted, its host rebooted or lost).

Not the program's failure, and not UNKNOWN ("we cannot tell"): the cloud or the host agent said why it ended.
The task's document decides (`on_interrupt`: requeue, the default, or fail); requeues have a cap of their own
(`interrupt_limit`, DEFAULT_INTERRUPT_LIMIT) and never use up `retry_limit`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.choices import DEFAULT_INTERRUPT_LIMIT, OnInterrupt, retry_backoff_seconds
from tasks.models import Task


@dataclass(frozen=True)
class AfterInterruption:
    requeue_in: int | None  # seconds to the next attempt; None: the task ends FAILED
    words: str


def after_interruption(task: Task) -> AfterInterruption:
    """Counts the interruption on the task (in memory) and says what follows it."""
    task.interruptions += 1
    spec = task.normalized or {}
    limit = spec.get("interrupt_limit", DEFAULT_INTERRUPT_LIMIT)
    if spec.get("on_interrupt", OnInterrupt.REQUEUE) == OnInterrupt.FAIL:
        return AfterInterruption(None, "not run again: the task asks to fail when interrupted (on_interrupt: fail)")
    if task.interruptions > limit:
        return AfterInterruption(
            None, f"not run again: interrupted {task.interruptions} times, over its limit of {limit} (interrupt_limit)"
        )
    delay = retry_backoff_seconds(task.interruptions)
    return AfterInterruption(
        delay,
        f"requeued in {delay} s (interruption {task.interruptions} of at most {limit}; retries are not used up)",
    )
