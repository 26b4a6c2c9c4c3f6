"""Copying what happens into the feed: every TaskEvent, every state an instance Operation reaches, every
change of an instance's readiness.

Task events are caught by `post_save` on TaskEvent, inside the transaction that appends them
(tasks.services.lifecycle.event_append), so an event and its feed copy commit or vanish together and the
task path needs no change. This is an outbox row, not business logic: it only copies.

Operations end through queryset updates (no signal), so their states are also picked up by a scan of the
Operations changed lately (`operations_capture`), run by every feed read and the pump job; `source` makes a
second capture of the same state a no-op.

Readiness changes are queryset updates too; resources sends `instance_readiness_changed` in the transaction
that wrote one (resources/services/readiness.py), as tasks sends `task_events_bulk_created`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models.signals import post_save
from django.utils import timezone

from cloudpivot.rows import objects_insert
from notifications.models import FeedEvent
from resources.models import Instance, Operation
from resources.services.readiness import instance_readiness_changed, readiness_words
from tasks.models import TaskEvent
from tasks.services.lifecycle import task_events_bulk_created

# How far back the scan looks for Operations that changed; the pump job runs every minute.
OPERATION_LOOKBACK = dt.timedelta(hours=1)


def connect() -> None:
    post_save.connect(task_event_saved, sender=TaskEvent, dispatch_uid="notifications.task_event")
    task_events_bulk_created.connect(task_events_saved, sender=TaskEvent, dispatch_uid="notifications.task_events")
    post_save.connect(operation_saved, sender=Operation, dispatch_uid="notifications.operation")
    instance_readiness_changed.connect(readiness_changed, sender=Instance, dispatch_uid="notifications.readiness")


def task_event_saved(sender: Any, instance: TaskEvent, created: bool, raw: bool = False, **kwargs: Any) -> None:
    if not created or raw:
        return
    task_event_entry(instance).save()


def task_events_saved(sender: Any, events: list[TaskEvent], **kwargs: Any) -> None:
    """Events inserted in bulk (a Runner's batch of progress reports) send no post_save: one INSERT copies them."""
    objects_insert(FeedEvent, [task_event_entry(event) for event in events])


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


def operation_saved(sender: Any, instance: Operation, raw: bool = False, **kwargs: Any) -> None:
    if raw:
        return
    FeedEvent.objects.bulk_create([operation_entry(instance)], ignore_conflicts=True)


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


def operations_capture() -> int:
    """Copy the states of Operations changed within the lookback that the feed does not have yet."""
    since = timezone.now() - OPERATION_LOOKBACK
    changed = Operation.objects.filter(updated_at__gte=since).only(
        "id",
        "project_id",
        "instance_id",
        "snapshot_id",
        "action",
        "state",
        "error_kind",
        "error_message",
        "created_at",
        "started_at",
        "finished_at",
    )
    entries = [operation_entry(operation) for operation in changed]
    if not entries:
        return 0
    known = set(FeedEvent.objects.filter(source__in=[e.source for e in entries]).values_list("source", flat=True))
    fresh = [e for e in entries if e.source not in known]
    FeedEvent.objects.bulk_create(fresh, ignore_conflicts=True)
    return len(fresh)
