"""Submitting tasks: the document is checked, bound to one project and connection, and queued."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from cloudpivot import realtime
from cloudpivot.accounts import quotas
from cloudpivot.accounts.models import AuditEntry, Project
from cloudpivot.accounts.project_secrets import secret_references_check
from cloudpivot.idempotency import canonical_sha256, replay_for_key
from cloudpivot.rows import objects_insert
from clusters.models import CloudConnection
from clusters.selectors import submission_target
from clusters.task_checks import task_spec_check
from tasks import dispatch
from tasks.models import Task, TaskEvent
from tasks.selectors import queue_ahead_sql
from tasks.services.admission import dispatch_off_reason
from tasks.services.lifecycle import task_events_appended
from tasks.specs import spec_normalize


def task_submit(
    *, user: AbstractBaseUser, document: Any, idempotency_key: str = "", audit: AuditEntry | None = None
) -> tuple[Task, bool]:
    """Create a PENDING task and ask for prompt admission. Returns (task, created).

    The hot path of the REST API, kept to reads that check the request and one short write transaction
    (the task with last_event_seq=1, its `submitted` event, that event's feed copy and the request's `audit`
    entry, if given, with the task's id as its object; on a connection with dispatch off the task is born
    saying so, with its `waiting` event in the same INSERT), so that on SQLite the one write lock is held as
    briefly as it can be and a submit commits once. The INSERT of the task also counts the PENDING tasks
    ahead of it: the task comes back with `queue_position_value` (its answer's `queue_position`).

    The same Idempotency-Key with the same document returns the first task; with another
    document it is a Conflict. The key's scope is the user, whichever token they use (`audit` is then not
    written: the caller records the replay as any other answer).
    """
    digest = canonical_sha256(document) if isinstance(document, dict) else ""
    if idempotency_key:
        existing = _task_for_key(user=user, key=idempotency_key, digest=digest)
        if existing:
            return existing, False
    spec, connection, project = task_document_check(user=user, document=document)
    quotas.check_can_ever_fit(project=project, connection_id=connection.pk, footprint=quotas.task_footprint(spec))
    task = Task(
        project=project,
        owner=user,
        connection=connection,
        backend=connection.backend,
        name=spec.get("name") or "",
        spec=document,
        spec_sha256=digest,
        normalized=spec,
        idempotency_key=idempotency_key,
        retry_limit=spec["retry_limit"],
        timeout_seconds=spec["timeout_seconds"],
        last_event_seq=1,
    )
    events = [
        TaskEvent(
            task=task,
            seq=1,
            type="submitted",
            message=f"submitted by {user} to {connection.cloud_id}",
            data={"cloud": connection.cloud_id, "project": project.slug},
        )
    ]
    if not connection.dispatch_enabled:  # born saying why it waits: no admission pass looks at this connection
        task.state_reason = dispatch_off_reason(connection.cloud_id)
        task.last_event_seq = 2
        events.append(TaskEvent(task=task, seq=2, type="waiting", message=task.state_reason))
    try:
        with transaction.atomic():  # one write transaction: the task, born with its first event
            # Prepared rows (cloudpivot/rows.py), not Model.save(): the ORM's compilation of the two INSERTs
            # was a fifth of a submit's CPU. The event's feed copy follows the bulk signal, in this transaction.
            (ahead,) = objects_insert(Task, [task], also_return=queue_ahead_sql())
            objects_insert(TaskEvent, events)
            task_events_appended.send(sender=TaskEvent, events=events)
            if audit is not None:
                audit.object_ref = str(task.pk)
                objects_insert(AuditEntry, [audit])
            realtime.ring_on_commit(task_id=task.pk, project_id=task.project_id, seq=task.last_event_seq)
            if connection.dispatch_enabled:
                transaction.on_commit(
                    partial(dispatch.wake_for_submitted, backend=connection.backend, connection_id=connection.pk)
                )
    except IntegrityError:
        existing = _task_for_key(user=user, key=idempotency_key, digest=digest) if idempotency_key else None
        if existing is None:
            raise
        return existing, False
    task.queue_position_value = ahead + 1
    return task, True


def task_document_check(*, user: AbstractBaseUser, document: Any) -> tuple[dict[str, Any], CloudConnection, Project]:
    """The checks of a submission that refuse a bad document (400/403/404 naming the field), before any quota:
    the normalized spec with its real `resources`, and where it would run. Shared with the dry run (fit.py)."""
    spec = spec_normalize(document)
    connection, project = submission_target(user=user, cloud_id=spec["cloud"], slug=spec.get("project"))
    if spec.get("secrets"):
        secret_references_check(project_id=project.pk, references=spec["secrets"])
    spec = task_spec_check(connection=connection, project=project, spec=spec)  # the cloud's checks, the footprint
    spec["project"] = project.slug
    return spec, connection, project


def _task_for_key(*, user: AbstractBaseUser, key: str, digest: str) -> Task | None:
    return replay_for_key(
        Task.objects.filter(owner=user),
        key=key,
        digest=digest,
        digest_field="spec_sha256",
        what="task document",
        new="task",
    )
