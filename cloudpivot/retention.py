"""Retention: how long CloudPivot keeps what piles up, and where it goes when it goes.

Each kind is first written to an archive file (gzip'd JSON lines under RETENTION_ARCHIVE_DIR, one file
per kind and day), then deleted, in batches, so a large backlog never holds a long transaction. What is
archived is what a person might ask for later: a finished task with its attempts, events and log; an
audit entry; a finished instance operation. Spent bootstrap secrets are deleted without an archive (their
hash grants nothing). A days setting of 0 keeps that kind for ever. Metric samples have their own
retention (clusters/metrics/downsampling.py).

Run by the daily `retention` schedule and by `python manage.py prune [--dry-run]`.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction
from django.utils import timezone

from cloudpivot.accounts.models import AuditEntry
from resources.choices import OPEN_OPERATION_STATES
from resources.models import Instance, Operation
from results.models import OutputFile
from results.services import outputs_discard, storage_forget
from runner_api.models import BootstrapSecret
from tasks.choices import TERMINAL, CleanupState
from tasks.models import Task

logger = logging.getLogger(__name__)
BATCH = 200
SECRET_COLUMNS = ("credential_nonce", "runner_token_hash")


@dataclass(frozen=True)
class Kind:
    name: str
    days: Callable[[], float]
    expired: Callable[[dt.datetime], models.QuerySet]
    record: Callable[[Any], dict[str, Any]] | None  # None: deleted without an archive
    # What goes with the rows outside the database, just before they are deleted (a task's stored outputs).
    discard: Callable[[list[Any]], None] | None = None


def _row(obj: models.Model, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every stored column of a row, by its column name (foreign keys as ids)."""
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields if f.name not in exclude}


def _finished_tasks(cutoff: dt.datetime) -> models.QuerySet:
    return (
        Task.objects.filter(state__in=TERMINAL, finished_at__lt=cutoff)
        .exclude(attempts__cleanup_state=CleanupState.PENDING)
        .order_by("finished_at", "id")
    )


def _task_record(task: Task) -> dict[str, Any]:
    """The task as the API shows it, with every attempt, event and log byte (base64: logs need not be UTF-8)."""
    return {
        "task": _row(task),
        "attempts": [
            _row(a, exclude=("credential_nonce", "runner_token_hash")) for a in task.attempts.order_by("number")
        ],
        "events": list(task.events.order_by("seq").values("seq", "type", "message", "data", "created_at")),
        "outputs": list(
            OutputFile.objects.filter(attempt__task=task)
            .order_by("attempt_id", "name")
            .values("attempt_id", "name", "state", "bytes", "sha256", "ref", "reason")
        ),
        "log": [
            {"attempt": c.attempt_id, "stream": c.stream, "offset": c.offset, "data": base64.b64encode(c.data).decode()}
            for c in task.log_chunks.order_by("attempt_id", "stream", "offset")
        ],
    }


def _finished_operations(cutoff: dt.datetime) -> models.QuerySet:
    in_flight = Instance.objects.filter(operation__isnull=False).values("operation_id")
    return (
        Operation.objects.exclude(state__in=OPEN_OPERATION_STATES)
        .filter(finished_at__lt=cutoff)
        .exclude(pk__in=in_flight)
        .order_by("finished_at", "id")
    )


def _spent_bootstrap_secrets(cutoff: dt.datetime) -> models.QuerySet:
    spent = models.Q(used_at__isnull=False) | models.Q(attempt__closed_at__isnull=False)
    return BootstrapSecret.objects.filter(spent, created_at__lt=cutoff).order_by("pk")


def _task_outputs_discard(tasks: list[Task]) -> None:
    """A task's outputs go from their store with it: what the policy removes from CloudPivot, it removes
    from the store too (docs/data.md). The manifest stays readable in the archive."""
    attempts = [attempt for task in tasks for attempt in task.attempts.all()]
    outputs_discard(attempts=attempts)
    storage_forget(attempts=attempts)  # created storage not removed stays on record (docs/data.md)


KINDS = [
    Kind("tasks", lambda: settings.RETENTION_TASK_DAYS, _finished_tasks, _task_record, _task_outputs_discard),
    Kind(
        "audit",
        lambda: settings.RETENTION_AUDIT_DAYS,
        lambda cutoff: AuditEntry.objects.filter(created_at__lt=cutoff).order_by("pk"),
        _row,
    ),
    Kind("operations", lambda: settings.RETENTION_OPERATION_DAYS, _finished_operations, _row),
    Kind("bootstrap-secrets", lambda: settings.RETENTION_BOOTSTRAP_SECRET_DAYS, _spent_bootstrap_secrets, None),
]


def prune(*, now: dt.datetime | None = None, dry_run: bool = False) -> dict[str, int]:
    """Archive, then delete, what each kind keeps no longer; return how many rows of each went (or would go)."""
    now = now or timezone.now()
    done = {}
    for kind in KINDS:
        days = kind.days()
        if not days:
            continue
        expired = kind.expired(now - dt.timedelta(days=days))
        done[kind.name] = expired.count() if dry_run else _archive_and_delete(kind, expired, now)
    return done


def _archive_and_delete(kind: Kind, expired: models.QuerySet, now: dt.datetime) -> int:
    count = 0
    while batch := list(expired[:BATCH]):
        if kind.record is not None:
            _append(archive_path(kind.name, now), (kind.record(row) for row in batch))
        if kind.discard is not None:  # after the archive, before the rows: a crash leaves rows without files
            kind.discard(batch)
        with transaction.atomic():  # the archive is written first: a crash here archives a batch twice, loses none
            type(batch[0]).objects.filter(pk__in=[row.pk for row in batch]).delete()
        count += len(batch)
    if count:
        logger.info("retention: %s rows of %s archived and deleted", count, kind.name)
    return count


def archive_path(kind: str, now: dt.datetime) -> Path:
    return Path(settings.RETENTION_ARCHIVE_DIR) / f"{kind}-{now:%Y-%m-%d}.jsonl.gz"


def _append(path: Path, records: Iterator[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.touch(mode=0o600)  # logs and audit trails: for the operator's eyes only
    with gzip.open(path, "at", encoding="utf-8") as archive:  # each append is a gzip member; readers see one stream
        for record in records:
            archive.write(json.dumps(record, cls=DjangoJSONEncoder, ensure_ascii=False) + "\n")


def read_archive(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as archive:
        return [json.loads(line) for line in archive]
