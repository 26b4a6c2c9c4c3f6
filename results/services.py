"""Writes of outputs: the manifest a Runner reports, and their removal (docs/data.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from results.choices import ManifestState, OutputState
from results.models import OutputFile, OutputManifest
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
