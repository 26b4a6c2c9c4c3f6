"""An element that ends may make room for the next one: the reconcile pass is rung after the commit.

Listens to tasks' announcement of new task events (tasks.services.lifecycle.task_events_appended, sent in the
writer's transaction); only a move of a set's element to an ended state rings. Progress events cost nothing; a
task that ends costs one look-up by the SetElement's unique task index.
"""

from __future__ import annotations

from typing import Any

from tasks import dispatch
from tasks.choices import TERMINAL
from tasks.models import TaskEvent
from tasks.services.lifecycle import on_commit_once, task_events_appended
from tasksets.models import SetElement


def connect() -> None:
    task_events_appended.connect(elements_ended, sender=TaskEvent, dispatch_uid="tasksets.elements_ended")


def elements_ended(sender: Any, events: list[TaskEvent], **kwargs: Any) -> None:
    ended = [event.task_id for event in events if event.type == "state" and (event.data or {}).get("to") in TERMINAL]
    if ended and SetElement.objects.filter(task_id__in=ended).exists():
        on_commit_once(dispatch.wake_reconciler)
