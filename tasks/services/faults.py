"""Fault isolation for the reconcile pass: one bad task, attempt or connection never stops the others.

Each unit of a pass step (a task, an attempt, a connection's batch) runs through `isolated`.
An error is logged with its traceback and written once as an `error` event on the tasks it
holds up (users see why nothing moves; the same error again in the next pass is not written
again), and the step goes on with the next unit. Connections have no history of their own,
so a connection's error is written on the tasks it holds up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction

from cloudpivot.exceptions import ApplicationError
from clusters.backends.base import BackendError
from tasks.models import TaskEvent
from tasks.services.lifecycle import event_append, task_lock

logger = logging.getLogger(__name__)


def isolated(step: str, work: Callable[[], int], *, task_ids: Iterable[Any] = ()) -> int:
    """`work()`, or 0 when it raised: logged, and recorded on the tasks of `task_ids`."""
    try:
        return work()
    except Exception as exc:
        ids = list(task_ids)
        logger.exception("reconcile step %s failed (tasks %s); the pass goes on", step, ", ".join(map(str, ids)))
        for task_id in ids:
            fault_record(task_id=task_id, step=step, exc=exc)
        return 0


def fault_words(exc: BaseException) -> str:
    """What went wrong, in one line: a cloud's or our own words as they are, anything else by its type."""
    if isinstance(exc, BackendError | ApplicationError):
        return exc.message
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first_line}"[:500]


def fault_record(*, task_id: Any, step: str, exc: BaseException) -> None:
    """An `error` event on the task, unless its latest event already says the same."""
    message = f"{step} failed: {fault_words(exc)}; CloudPivot tries again in the next pass"
    try:
        with transaction.atomic():
            task = task_lock(task_id)
            latest = TaskEvent.objects.filter(task=task, seq=task.last_event_seq).values_list("type", "message")
            if latest.first() == ("error", message):
                return
            event_append(task=task, type="error", message=message, data={"step": step, "error": type(exc).__name__})
    except Exception:
        logger.exception("could not record the error of %s on task %s", step, task_id)
