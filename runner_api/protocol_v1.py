"""Protocol v1 is retired (docs/runner.md, "How the versions coexist"): the server answers it only for attempts
that were started before this release was installed, a VM booted earlier whose Runner still speaks it.

The moment of the upgrade is when the migration `runner_api.0002_protocol_v1_retired` was applied: it carries no
schema change, only that date, so no operator has to set one. Every attempt started since runs the one host
program (runner_api/agent/cloudpivot_agent.py) over protocol v2.
"""

from __future__ import annotations

import datetime as dt

from django.db.migrations.recorder import MigrationRecorder
from rest_framework.exceptions import AuthenticationFailed

from tasks.models import Attempt

RETIRING_MIGRATION = ("runner_api", "0002_protocol_v1_retired")
_retired_at: list[dt.datetime] = []  # cached once known: it never changes


def v1_retired_at() -> dt.datetime | None:
    """When v1 stopped being handed out here; None while the migration is not applied (v1 still served)."""
    if not _retired_at:
        app, name = RETIRING_MIGRATION
        applied = MigrationRecorder.Migration.objects.filter(app=app, name=name).values_list("applied", flat=True)
        if not applied:
            return None
        _retired_at.append(applied[0])
    return _retired_at[0]


def refuse_if_retired(attempt: Attempt) -> None:
    """401 (a Runner stops at once on it: no retries for minutes) for an attempt started under protocol v2."""
    retired_at = v1_retired_at()
    if retired_at is not None and attempt.created_at >= retired_at:
        raise AuthenticationFailed(
            f"Protocol v1 is retired: attempt {attempt.external_name} was started after this server stopped "
            "handing it out and runs under the host agent (POST /runner/v2/sync). Nothing was changed.",
            code="protocol_retired",
        )
