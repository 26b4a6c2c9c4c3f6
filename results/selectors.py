"""Reads of outputs (docs/data.md): the manifest of a task's attempt, with fresh links for what is stored; and
the record of the storage each attempt borrowed or created."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Q, QuerySet

from cloudpivot.exceptions import NotFound
from results.choices import OutputState, StorageRole, StorageState
from results.links import link_mint
from results.models import OutputManifest, StorageReference
from results.stores import store_of
from tasks.models import Attempt, Task
from tasks.selectors import task_get_for_user


def task_outputs(*, user: AbstractBaseUser, task_id: Any, attempt_number: int | None = None) -> dict[str, Any]:
    """The outputs of the task's attempt (default: its latest), each stored file with a freshly minted link.
    A foreign task is NotFound, as everywhere."""
    task = task_get_for_user(user=user, task_id=task_id)
    return attempt_outputs(task=task, attempt_number=attempt_number)


def attempt_outputs(*, task: Task, attempt_number: int | None = None) -> dict[str, Any]:
    """The same for a task already read through its visibility selector (the task page)."""
    attempts = task.attempts.order_by("-number")
    attempt = (attempts.filter(number=attempt_number) if attempt_number else attempts).first()
    if attempt is None:
        if attempt_number:
            raise NotFound(f"the task has no attempt {attempt_number}")
        return {"attempt": None, "declared": task.normalized.get("outputs") or [], "state": "none", "files": []}
    return _manifest(task, attempt)


def _manifest(task: Task, attempt: Attempt) -> dict[str, Any]:
    manifest = OutputManifest.objects.filter(attempt=attempt).first()
    declared = task.normalized.get("outputs") or []
    if manifest is None:
        state = "pending" if declared and not attempt.is_closed else "none"
        reason = "" if state == "pending" or not declared else "no outputs were reported for this attempt"
        return {"attempt": attempt.number, "declared": declared, "state": state, "reason": reason, "files": []}
    files, store = [], None
    for row in attempt.output_files.order_by("name"):
        item = {"name": row.name, "state": row.state, "bytes": row.bytes, "sha256": row.sha256, "reason": row.reason}
        if row.state == OutputState.STORED:
            try:
                store = store or store_of(attempt, manifest.store)
            except LookupError as exc:
                item["reason"] = f"no link: {exc}"
                files.append(item)
                continue
            link = link_mint(row, store)
            item |= {"url": link.url, "expires_at": link.expires_at}
        files.append(item)
    return {
        "attempt": attempt.number,
        "declared": declared,
        "state": manifest.state,
        "reason": manifest.reason,
        "store": manifest.store,
        "reported_at": manifest.created_at,
        "files": files,
    }


STORAGE_FIELDS = ("index", "kind", "ref", "name", "path", "mode", "role", "state", "created_at", "released_at")


def storage_of_attempts(*, attempts: list[Attempt]) -> dict[int, list[dict[str, Any]]]:
    """Attempt id → the storage it borrowed or created, in the task's `data` order (one query for them all)."""
    found: dict[int, list[dict[str, Any]]] = {attempt.pk: [] for attempt in attempts}
    for row in StorageReference.objects.filter(attempt__in=attempts).values("attempt_id", *STORAGE_FIELDS):
        found[row.pop("attempt_id")].append(row)
    return found


def storage_left_behind() -> QuerySet[StorageReference]:
    """Storage attempts created that nobody removed or kept: its attempt is gone or ended (docs/orphans.md)."""
    ended = Q(attempt__isnull=True) | Q(attempt__closed_at__isnull=False)
    left = StorageReference.objects.filter(role=StorageRole.CREATED).exclude(
        state__in=[StorageState.DELETED, StorageState.KEPT]
    )
    return left.filter(ended).select_related("connection", "project")


def task_data_view(*, task: Task) -> dict[str, Any]:
    """The task page's Data section: its latest attempt's record of each reference (role and state), or, before
    an attempt started, the references the document names (state "not started")."""
    attempt = task.attempts.order_by("-number").first()
    rows = storage_of_attempts(attempts=[attempt])[attempt.pk] if attempt else []
    if not rows:
        rows = [
            {**ref, "index": index, "name": ref.get("name") or "", "role": "", "state": "not started"}
            for index, ref in enumerate(task.normalized.get("data") or [])
        ]
    return {"attempt": attempt.number if attempt and rows and rows[0]["role"] else None, "refs": rows}
