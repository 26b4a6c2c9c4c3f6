"""Writes of outputs: the manifest a Runner reports, and their removal (docs/data.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from clusters.data_refs import CREATED_KINDS
from results.choices import ManifestState, OutputState, StorageRole, StorageState
from results.models import OutputFile, OutputManifest, StorageReference
from results.stores import store_for_attempt, store_of
from tasks.models import Attempt, Task


def outputs_record(*, task: Task, attempt: Attempt, manifest: dict[str, Any]) -> str:
    """Store the manifest of the `outputs` event (in the report's transaction, the task locked); a resend
    replaces nothing (the Runner's seq makes it once). Returns the sentence for the task's history."""
    if OutputManifest.objects.filter(attempt=attempt).exists():
        return "outputs reported again (ignored)"
    store = store_for_attempt(attempt)
    rows: dict[str, OutputFile] = {}
    for item in manifest.get("files") or []:
        rows.setdefault(
            item["name"],
            OutputFile(
                attempt=attempt,
                name=item["name"],
                state=OutputState.STORED,
                bytes=item["bytes"],
                sha256=item["sha256"],
                ref=store.ref(attempt.external_name, item["name"]),  # ours, not the execution's word
            ),
        )
    for item in manifest.get("missing") or []:
        rows.setdefault(
            item["name"],
            OutputFile(attempt=attempt, name=item["name"], state=OutputState.MISSING, reason=item.get("reason") or ""),
        )
    OutputFile.objects.bulk_create(rows.values())
    stored = sum(1 for row in rows.values() if row.state == OutputState.STORED)
    complete = bool(manifest.get("complete")) and stored == len(rows)
    reason = "" if complete else str(manifest.get("reason") or "some outputs are missing")
    OutputManifest.objects.create(
        attempt=attempt,
        state=ManifestState.COMPLETE if complete else ManifestState.INCOMPLETE,
        reason=reason,
        store=store.kind,
        location=str(store.location(attempt.external_name)),
    )
    size = sum(row.bytes or 0 for row in rows.values())
    words = f"{stored} output{'s' if stored != 1 else ''} kept ({size} bytes)"
    return words if complete else f"{words}; incomplete: {reason}"


def outputs_discard(*, attempts: Iterable[Attempt]) -> int:
    """Remove what the stores keep of these attempts (retention; the rows go with their attempts)."""
    attempts, count = list(attempts), 0
    kinds = dict(OutputManifest.objects.filter(attempt__in=attempts).values_list("attempt_id", "store"))
    for attempt in attempts:
        try:
            store = store_of(attempt, kinds[attempt.pk]) if attempt.pk in kinds else store_for_attempt(attempt)
        except LookupError:
            continue  # its store is gone with the connection's settings: nothing of ours to remove
        store.discard(attempt.external_name)
        count += 1
    return count


def storage_begin(*, attempt: Attempt) -> int:
    """Record each data reference of the attempt's task as in use (docs/data.md), once: an attempt that has its
    rows (a hand-out sent again) gets none more. Returns the number written."""
    if StorageReference.objects.filter(attempt=attempt).exists():
        return 0
    task = attempt.task
    rows = [
        StorageReference(
            attempt=attempt,
            attempt_name=attempt.external_name,
            connection_id=task.connection_id,
            project_id=task.project_id,
            owner_id=task.owner_id,
            index=index,
            kind=ref["kind"],
            ref=ref["ref"],
            name=ref.get("name") or "",
            path=ref.get("path") or "",
            mode=ref.get("mode") or "ro",
            role=StorageRole.CREATED if ref["kind"] in CREATED_KINDS else StorageRole.BORROWED,
        )
        for index, ref in enumerate(task.normalized.get("data") or [])
    ]
    StorageReference.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def storage_end(*, attempt: Attempt) -> int:
    """The attempt ended: what it borrowed is released, what it created and the task keeps is kept; what it created
    otherwise is released, to be removed by the attempt's cleanup (then deleted). Returns the rows moved."""
    now = timezone.now()
    in_use = StorageReference.objects.filter(attempt=attempt, state=StorageState.IN_USE)
    keep = {index for index, ref in enumerate(attempt.task.normalized.get("data") or []) if ref.get("keep")}
    kept = in_use.filter(role=StorageRole.CREATED, index__in=keep).update(state=StorageState.KEPT, released_at=now)
    return kept + in_use.update(state=StorageState.RELEASED, released_at=now)


def storage_forget(*, attempts: Iterable[Attempt]) -> int:
    """Retention: the records of these attempts go with them, except storage they created that was not removed
    (kept on purpose, or left behind), which stays on record for its owner and the admins."""
    created_left = {"role": StorageRole.CREATED, "state__in": [StorageState.IN_USE, StorageState.RELEASED]}
    rows = StorageReference.objects.filter(attempt__in=list(attempts)).exclude(**created_left)
    return rows.exclude(state=StorageState.KEPT).delete()[0]
