"""The feed's order and its reads: the sequencer gives positions, readers page by them.

A position is given only to committed entries, inside one transaction that holds the FeedSequence row's
lock, oldest entry first. Two sequencers therefore take turns, and a reader that sees position N has
already been able to see every position below N: the order never changes after a restart and no entry
appears behind a cursor a client has passed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from cloudpivot.accounts.selectors import projects_visible_to
from cloudpivot.exceptions import ApplicationError
from notifications.models import FeedEvent, FeedSequence

SEQUENCE_BATCH = 5000
NUMBER_BATCH = """
UPDATE notifications_feedevent SET position = %s + numbered.rn
FROM (
    SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS rn FROM notifications_feedevent
    WHERE position IS NULL AND id <= %s
) AS numbered
WHERE notifications_feedevent.id = numbered.id
"""


class CursorExpired(ApplicationError):
    """The cursor points before what retention kept: resuming there would silently skip entries."""

    code = "cursor_expired"
    status = 410


def feed_sequence() -> int:
    """Give positions to the committed entries that have none, in the order they were written."""
    given = 0
    if not FeedEvent.objects.filter(position__isnull=True).exists():  # the common case: no write at all
        return 0
    while True:
        with transaction.atomic():
            # The UPDATE takes the row lock first (PostgreSQL) or the write lock (SQLite, IMMEDIATE).
            if not FeedSequence.objects.filter(pk=1).update(last_position=F("last_position")):
                FeedSequence.objects.bulk_create([FeedSequence(pk=1)], ignore_conflicts=True)
            sequence = FeedSequence.objects.select_for_update().get(pk=1)
            waiting = FeedEvent.objects.filter(position__isnull=True)
            batch_end = waiting.order_by("id").values_list("id", flat=True)[SEQUENCE_BATCH - 1 : SEQUENCE_BATCH]
            last_id = next(iter(batch_end), None) or waiting.order_by("-id").values_list("id", flat=True).first()
            if last_id is None:
                return given
            with connection.cursor() as cursor:
                # one statement numbers the batch in id order (PostgreSQL and SQLite ≥ 3.33 both speak it)
                cursor.execute(NUMBER_BATCH, [sequence.last_position, last_id])
                count = cursor.rowcount
            sequence.last_position += count
            sequence.save(update_fields=["last_position"])
        given += count
        if count < SEQUENCE_BATCH:
            return given


def feed_refresh() -> int:
    """Bring the feed up to date (every entry is copied when its change is written): sequence; how many were given."""
    return feed_sequence()


@dataclass(frozen=True)
class FeedFilter:
    types: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    task: str | None = None
    instance: str | None = None


def feed_visible_to(*, user: AbstractBaseUser, where: FeedFilter) -> QuerySet[FeedEvent]:
    entries = FeedEvent.objects.filter(position__isnull=False).select_related("project")
    if not user.is_superuser:
        entries = entries.filter(project__in=projects_visible_to(user=user))
    if where.projects:
        entries = entries.filter(project__slug__in=where.projects)
    if where.types:
        entries = entries.filter(types_q(where.types))
    if where.task:
        entries = entries.filter(task_id=where.task)
    if where.instance:
        entries = entries.filter(instance_id=where.instance)
    return entries


def types_q(types: Iterable[str]) -> Q:
    """`task.state` matches itself, `task.*` every task event; an empty list matches all."""
    query = Q()
    for name in types:
        query |= Q(type__startswith=name[:-1]) if name.endswith(".*") else Q(type=name)
    return query


def entry_document(entry: FeedEvent) -> dict[str, Any]:
    """One entry as the API and the webhooks show it (FeedEventSerializer documents this shape)."""
    return {
        "id": entry.position,
        "type": entry.type,
        "time": entry.occurred_at.isoformat().replace("+00:00", "Z"),
        "project": entry.project.slug,
        "task": str(entry.task_id) if entry.task_id else None,
        "instance": str(entry.instance_id) if entry.instance_id else None,
        "operation": str(entry.operation_id) if entry.operation_id else None,
        "message": entry.message,
        "data": entry.data,
    }


def feed_page(
    *, user: AbstractBaseUser, where: FeedFilter, after: int, limit: int
) -> tuple[list[FeedEvent], int, bool]:
    """Entries after `after` in position order, read once (a long-poll waits in notifications/api/long_poll.py,
    on the event loop, and calls this for each look).

    Returns the entries, the cursor to pass next and whether more are waiting. The cursor is the last entry's
    position, or (with nothing new) the highest position given so far, so a filtered follower does not rescan
    what it was never going to see.
    """
    pruned = FeedSequence.objects.filter(pk=1).values_list("pruned_through", flat=True).first() or 0
    if after < pruned:
        raise CursorExpired(
            f"cursor {after} is older than the feed keeps (entries up to {pruned} were pruned); "
            f"start again from {pruned}",
            extra={"oldest_cursor": pruned},
        )
    feed_refresh()
    high = FeedSequence.objects.filter(pk=1).values_list("last_position", flat=True).first() or 0
    visible = feed_visible_to(user=user, where=where).filter(position__gt=after).order_by("position")
    rows = list(visible[: limit + 1])
    if rows:
        return rows[:limit], rows[:limit][-1].position, len(rows) > limit
    return [], max(after, high), False


def feed_prune(*, before: timezone.datetime) -> int:
    """Delete sequenced entries older than `before`; cursors below the newest pruned position then get 410."""
    with transaction.atomic():
        doomed = FeedEvent.objects.filter(position__isnull=False, occurred_at__lt=before)
        top = doomed.order_by("-position").values_list("position", flat=True).first()
        if top is None:
            return 0
        # deliveries still pending for these entries go with them
        count, _ = FeedEvent.objects.filter(position__lte=top).delete()
        FeedSequence.objects.filter(pk=1, pruned_through__lt=top).update(pruned_through=top)
        return count
