"""Audit entries for what no request carries: schedules' changes, snapshot prunes, orphan actions (DESIGN §7).

API requests are audited by the middleware; this covers the system's own writes and the outcome of an
admin action on the cloud (orphans.actions), besides the request's own entry. Never secrets.
"""

from __future__ import annotations

import logging
from typing import Any

from cloudpivot.accounts.models import AuditEntry

logger = logging.getLogger(__name__)


def audit_system(
    *,
    action: str,
    object_ref: str,
    details: dict[str, Any],
    actor: Any = None,
    via: str = "system",
    outcome: str = "ok",
) -> None:
    """One AuditEntry (via "system" unless said); a failure is logged, never raised (the change itself stands)."""
    try:
        AuditEntry.objects.create(
            actor=actor,
            actor_name=actor.get_username() if actor is not None else "cloudpivot",
            via=via,
            action=action[:100],
            method="",
            path="",
            object_ref=object_ref[:200],
            status_code=0,
            outcome=outcome,
            details=details,
        )
    except Exception:
        logger.exception("could not record the audit entry %s for %s", action, object_ref)
