"""Accepting a task set: every element is checked now, and one row is written, however many elements there are.

The elements become Tasks later, as room frees (tasksets.services.materialize), through the same submission
as a single task; so what a single task is checked against at submission (the document, the cloud and the
project the user may use, quotas it could never fit) is checked here once, on element 0, and the
substitution of every element is checked in memory (tasksets.templating).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from cloudpivot.accounts import quotas
from cloudpivot.idempotency import canonical_sha256, replay_for_key
from tasks import dispatch
from tasks.services.submission import task_document_check
from tasks.specs import spec_normalize
from tasksets.models import TaskSet
from tasksets.services.lifecycle import taskset_announce_state
from tasksets.specs import fields_under, set_request_check
from tasksets.templating import element_document, elements_check


def taskset_submit(*, user: AbstractBaseUser, body: Any, idempotency_key: str = "") -> tuple[TaskSet, bool]:
    """Check a set request and write the set; wake the reconcile pass to make its first elements. (set, created).

    The same Idempotency-Key with the same body returns the first set; with another body it is a Conflict.
    """
    digest = canonical_sha256(body)
    existing = _set_for_key(user=user, key=idempotency_key, digest=digest)
    if existing is not None:
        return existing, False
    request = set_request_check(body)
    template, items = request["template"], request["items"]
    with fields_under("template"):
        spec_normalize(template)  # the template's own faults first, named as template fields
    elements_check(template, count=request["count"], items=items)
    first = element_document(
        template, index=0, params=items[0] if items else None, project=template.get("project"), set_name=""
    )
    with fields_under("template"):
        spec, connection, project = task_document_check(user=user, document=first)
    quotas.check_can_ever_fit(project=project, connection_id=connection.pk, footprint=quotas.task_footprint(spec))
    task_set = TaskSet(
        project=project,
        owner=user,
        connection=connection,
        name=request["name"] or template.get("name") or "",
        template=template,
        count=request["count"],
        items=items,
        total=request["count"] or len(items),
        max_running=request["max_running"],
        request_sha256=digest,
        idempotency_key=idempotency_key,
    )
    try:
        with transaction.atomic():
            task_set.save(force_insert=True)
            taskset_announce_state(task_set=task_set, was=None, at=task_set.created_at)
            transaction.on_commit(dispatch.wake_reconciler)  # the pass makes the first elements
    except IntegrityError:
        existing = _set_for_key(user=user, key=idempotency_key, digest=digest)
        if existing is None:
            raise
        return existing, False
    return task_set, True


def _set_for_key(*, user: AbstractBaseUser, key: str, digest: str) -> TaskSet | None:
    return replay_for_key(
        TaskSet.objects.filter(owner=user),
        key=key,
        digest=digest,
        digest_field="request_sha256",
        what="task set request",
        new="task set",
    )
