"""The orphan scan: compute each connection's report and store it as OrphanFinding rows.

Stored, not computed per page view: listing clouds takes seconds and may fail, while the admin's
changelist, its actions and the `needs_cleanup` marks need rows that outlive one request. A connection
whose cloud does not answer keeps its previous findings (nothing is concluded from silence).
"""

from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction
from django.utils import timezone

from clusters.backends.base import BackendError
from clusters.models import CloudConnection
from orphans.listers import tagged_lister
from orphans.models import FindingState, OrphanFinding
from orphans.report import Report, connection_report

logger = logging.getLogger(__name__)
DELETE_GRACE = dt.timedelta(minutes=10)  # a cloud may take this long to make a deleted resource disappear


def orphans_scan(*, connections=None) -> str:
    """Scan every (or the given) connection; a summary line for the schedule's result."""
    if connections is None:
        connections = CloudConnection.objects.order_by("cloud_id")
    parts = []
    for connection in connections:
        if tagged_lister(connection) is None:
            continue  # `local` runs processes on this host: nothing of it is tagged in a cloud
        try:
            report = connection_report(connection)
        except BackendError as exc:
            logger.warning("orphan scan of %s: %s", connection.cloud_id, exc.message)
            parts.append(f"{connection.cloud_id}: not scanned ({exc.message})")
            continue
        counts = findings_store(report)
        notes = f" ({'; '.join(report.notes)})" if report.notes else ""
        parts.append(f"{connection.cloud_id}: {counts['found']} found, {counts['resolved']} resolved{notes}")
    return "; ".join(parts) or "no connections"


def findings_store(report: Report) -> dict[str, int]:
    """Upsert the report's findings; open findings no longer reported become resolved."""
    now = timezone.now()
    seen: set[tuple[str, str]] = set()
    with transaction.atomic():
        existing = {
            (f.kind, f.ref): f for f in OrphanFinding.objects.select_for_update().filter(connection=report.connection)
        }
        for finding in report.findings:
            seen.add((finding.kind, finding.ref))
            row = existing.get((finding.kind, finding.ref))
            values = {
                "name": finding.name[:255],
                "uid": finding.uid,
                "category": finding.category,
                "reason": finding.reason,
                "protected_reason": finding.protected_reason,
                "evidence": finding.evidence,
                "last_seen_at": now,
            }
            if row is None:
                OrphanFinding.objects.create(
                    connection=report.connection, kind=finding.kind, ref=finding.ref, first_seen_at=now, **values
                )
                continue
            if row.state in (FindingState.RESOLVED, FindingState.ADOPTED):
                values.update(state=FindingState.OPEN, resolved_at=None, error="", first_seen_at=now)
            elif row.state == FindingState.DELETED and row.acted_at and now - row.acted_at > DELETE_GRACE:
                values.update(
                    state=FindingState.NEEDS_CLEANUP,
                    error=f"deleted at {row.acted_at:%Y-%m-%d %H:%M} UTC, yet still in the cloud",
                )
            OrphanFinding.objects.filter(pk=row.pk).update(**values)
        gone = [
            row.pk
            for key, row in existing.items()
            if key not in seen and row.state in (FindingState.OPEN, FindingState.NEEDS_CLEANUP, FindingState.DELETED)
        ]
        OrphanFinding.objects.filter(pk__in=gone).update(state=FindingState.RESOLVED, resolved_at=now)
    return {"found": len(seen), "resolved": len(gone)}
