"""Two attempts of a task side by side: spec differences, exit, failure class, phase times, last log lines.

Reads only. Each attempt's spec comes from specs_by_attempt (a retry with changes records what it
changed), its phases from tasks.phases, its failure class and suggestion from tasks.services.suggestions.
"""

from __future__ import annotations

from typing import Any

from cloudpivot.exceptions import NotFound
from tasks.choices import TERMINAL, TaskState
from tasks.models import Attempt, Task
from tasks.phases import attempts_with_phases
from tasks.services.attempts import MAX_ATTEMPTS
from tasks.services.debug_hold import debug_hold_view
from tasks.services.logs import log_read
from tasks.services.spec_changes import spec_differences, specs_by_attempt
from tasks.services.suggestions import FAILURE_CLASSES, failure_class, suggestion_for

LOG_LINES = 10
LOG_TAIL_BYTES = 8192


def attempts_annotated(task: Task, attempts: list[Attempt]) -> list[Attempt]:
    """Give each attempt its `spec`, `phases`, `failure_class` (+ `failure_words`), `suggestion` and
    `debug_hold` (None unless it was kept after a failure: tasks/services/debug_hold.py)."""
    specs = specs_by_attempt(task)
    for attempt in attempts:
        attempt.task = task
    attempts_with_phases(attempts)
    for attempt in attempts:
        attempt.spec = specs.get(attempt.number, task.normalized)
        attempt.failure_class = failure_class(attempt)
        attempt.failure_words = FAILURE_CLASSES.get(attempt.failure_class, "")
        attempt.suggestion = suggestion_for(attempt, attempt.spec) if attempt.closed_at else None
        attempt.debug_hold = debug_hold_view(attempt)
    return attempts


def task_suggestion(task: Task, attempts: list[Attempt]) -> dict[str, Any] | None:
    """What to retry the task with: its latest attempt's suggestion, while the task may be retried."""
    if task.state not in TERMINAL | {TaskState.UNKNOWN} or not attempts:
        return None
    latest = max(attempts, key=lambda a: a.number)
    return getattr(latest, "suggestion", None)


def default_pair(task: Task) -> tuple[int, int]:
    """The latest attempt and the one before it (the same one twice for a task with one attempt)."""
    latest = max(task.attempts_count, 1)
    return max(latest - 1, 1), latest


def attempts_compare(task: Task, a: int | None = None, b: int | None = None) -> dict[str, Any]:
    """The two attempts (numbers a and b; by default the last two) and what differs between them."""
    default_a, default_b = default_pair(task)
    a, b = a or default_a, b or default_b
    numbers = {n for n in (a, b) if 0 < n <= MAX_ATTEMPTS}  # no query with a number no column can hold
    found = {attempt.number: attempt for attempt in task.attempts.filter(number__in=numbers)}
    for name, number in (("a", a), ("b", b)):
        if number not in found:
            raise NotFound(
                f"the task has no attempt {number}",
                errors=[{"field": name, "message": f"no attempt {number}; it has {task.attempts_count}"}],
            )
    attempts_annotated(task, list(found.values()))
    left, right = found[a], found[b]
    return {
        "a": attempt_side(task, left),
        "b": attempt_side(task, right),
        "spec_differences": [
            {"field": d["field"], "a": d["from"], "b": d["to"]} for d in spec_differences(left.spec, right.spec)
        ],
    }


def attempt_side(task: Task, attempt: Attempt) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "external_name": attempt.external_name,
        "state": attempt.state,
        "exit_code": attempt.exit_code,
        "exit_signal": attempt.exit_signal,
        "failure_class": attempt.failure_class,
        "failure_reason": attempt.failure_reason or attempt.start_error,
        "phases": attempt.phases,
        "last_log_lines": last_log_lines(task, attempt),
        "spec": attempt.spec,
        "suggestion": attempt.suggestion,
    }


def last_log_lines(task: Task, attempt: Attempt, lines: int = LOG_LINES) -> list[str]:
    if not attempt.log_bytes:
        return []
    start = max(0, attempt.log_bytes - LOG_TAIL_BYTES)
    text = log_read(task=task, attempt_number=attempt.number, offset=start, limit=LOG_TAIL_BYTES)["data"]
    return text.rstrip("\n").split("\n")[-lines:]
