"""The record of what an attempt borrowed or created (its `data` references, docs/data.md), kept by the results app.

tasks cannot import results (a higher layer): results hands in its two writers when Django starts, and the
attempt's start (the hand-out to a host agent, or the cloud's start) and its close call them, in their
transaction. A task without `data` costs nothing here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tasks.models import Attempt

_STORAGE: dict[str, Callable[..., Any]] = {}


def register_storage_record(*, begin: Callable[..., Any], end: Callable[..., Any]) -> None:
    """The results app hands in `begin(attempt=)`, which records each data reference of the attempt's task as in
    use (once: a hand-out sent again records nothing), and `end(attempt=)`, which releases them."""
    _STORAGE.update(begin=begin, end=end)


def storage_begin(attempt: Attempt) -> None:
    if attempt.task.normalized.get("data") and "begin" in _STORAGE:
        _STORAGE["begin"](attempt=attempt)


def storage_end(attempt: Attempt, task: Any = None) -> None:
    if (task or attempt.task).normalized.get("data") and "end" in _STORAGE:
        _STORAGE["end"](attempt=attempt)
