"""Copying what happens into the feed: every TaskEvent, every state an instance Operation reaches, every
change of an instance's readiness.

Each is announced by the one writer of its rows, inside the transaction that writes it, so a change and its
feed copy commit or vanish together and no reader scans for what it missed: `task_events_appended` by
tasks.services.lifecycle (and the other appenders of task events), `operation_state_changed` by
resources.services.operations, `instance_readiness_changed` by resources.services.readiness, `taskset_announced`
by tasksets.services.lifecycle (connected in apps.py: task sets sit beside this app, not below). These are outbox
rows, not business logic: they only copy. `source` makes a second copy of the same state a no-op (a resumed
Operation is RUNNING twice).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from cloudpivot.realtime import ring_feed_on_commit
from cloudpivot.rows import objects_insert
from notifications.models import FeedEvent
from resources.models import Instance, Operation
from resources.services.operations import operation_state_changed
from resources.services.readiness import instance_readiness_changed, readiness_words
from tasks.models import TaskEvent
from tasks.services.lifecycle import task_events_appended


def connect() -> None:
    task_events_appended.connect(task_events_saved, sender=TaskEvent, dispatch_uid="notifications.task_events")
    operation_state_changed.connect(operation_changed, sender=Operation, dispatch_uid="notifications.operation")
    instance_readiness_changed.connect(readiness_changed, sender=Instance, dispatch_uid="notifications.readiness")


def task_events_saved(sender: Any, events: list[TaskEvent], **kwargs: Any) -> None:
    """One event or a Runner's batch of progress reports: one INSERT copies them."""
    objects_insert(FeedEvent, [task_event_entry(event) for event in events])
    ring_feed_on_commit()


def task_event_entry(event: TaskEvent) -> FeedEvent:
    task = event.task
    # A state event says the state it led to: the task may have moved on since in the same batch (PENDING →
    # SUBMITTING → STARTING written together by lifecycle.Transitions).
    state = (event.data or {}).get("to", task.state) if event.type == "state" else task.state
    return FeedEvent(
        type=f"task.{event.type}",
        project_id=task.project_id,
        task_id=task.pk,
        message=event.message,
        data={"task_seq": event.seq, "task_state": state, **dict(event.data or {})},
        occurred_at=event.created_at,
        source=f"task-event:{event.pk}",
    )


def operation_changed(sender: Any, operation: Operation, **kwargs: Any) -> None:
    FeedEvent.objects.bulk_create([operation_entry(operation)], ignore_conflicts=True)
    ring_feed_on_commit()


def operation_entry(operation: Operation) -> FeedEvent:
    return FeedEvent(
        type="operation.state",
        project_id=operation.project_id,
        instance_id=operation.instance_id,
        operation_id=operation.pk,
        message=f"{operation.action} {operation.state}"
        + (f": {operation.error_message}" if operation.error_message else ""),
        data={
            "action": operation.action,
            "state": operation.state,
            "error_kind": operation.error_kind,
            "snapshot": str(operation.snapshot_id) if operation.snapshot_id else None,
        },
        occurred_at=operation.finished_at or operation.started_at or operation.created_at or timezone.now(),
        source=f"operation:{operation.pk}:{operation.state}",
    )


def readiness_changed(
    sender: Any, instance: Instance, ready: bool, reason: str, at: dt.datetime, **kwargs: Any
) -> None:
    FeedEvent.objects.bulk_create([readiness_entry(instance, ready=ready, reason=reason, at=at)], ignore_conflicts=True)
    ring_feed_on_commit()


def readiness_entry(instance: Instance, *, ready: bool, reason: str, at: dt.datetime) -> FeedEvent:
    """`source` names the change by its time (readiness_changed_at), so a change is copied once."""
    return FeedEvent(
        type="instance.readiness",
        project_id=instance.project_id,
        instance_id=instance.pk,
        message=f"{readiness_words(ready)}: {reason}",
        data={"was": readiness_words(not ready), "now": readiness_words(ready), "ready": ready, "reason": reason},
        occurred_at=at,
        source=f"instance-readiness:{instance.pk}:{at.isoformat()}",
    )


def feed_announce_once(*, type: str, project_id: int, message: str, data: dict[str, Any], source: str) -> None:
    """A feed entry of another app's own (a budget's warning), written once: `source` is unique, so the same
    announcement again adds nothing. The listeners are rung after commit."""
    entry = FeedEvent(
        type=type, project_id=project_id, message=message, data=data, occurred_at=timezone.now(), source=source
    )
    FeedEvent.objects.bulk_create([entry], ignore_conflicts=True)
    ring_feed_on_commit()


def taskset_announced(
    sender: Any, task_set: Any, type: str, message: str, data: dict[str, Any], at: dt.datetime, **kwargs: Any
) -> None:
    """A task set's `set.state` or `set.finished`: one entry of the set's project, the set's id in `data.set`."""
    FeedEvent.objects.bulk_create([taskset_entry(task_set, type, message, data, at)], ignore_conflicts=True)
    ring_feed_on_commit()


def taskset_entry(task_set: Any, type_: str, message: str, data: dict[str, Any], at: dt.datetime) -> FeedEvent:
    """`source` names the announcement by its time, so each state and each end is copied once."""
    return FeedEvent(
        type=f"set.{type_}",
        project_id=task_set.project_id,
        message=message,
        data={"set": str(task_set.pk), "set_name": task_set.name, **data},
        occurred_at=at,
        source=f"task-set:{task_set.pk}:{type_}:{at.isoformat()}",
    )
