"""A start claim stays its worker's while the cloud is being asked: the worker renews it as it waits.

`starts_due` claims an attempt (STARTING, `updated_at` now) before its cloud is asked, and claims it
again once `updated_at` is START_RETRY_SECONDS (5 s) old: the start failed, or its worker died while
asking. A cloud that is merely slow (a Nova create may take longer than that) must not look like a dead
worker, or a second pass asks for a second server while the first call is still under way. So while
`ensure_started` runs, a thread of the worker's (cloudpivot/heartbeat.py) renews `updated_at` every
HEARTBEAT_SECONDS; a renewal that fails (a database blip) is tried again at the next beat. A dead
worker's beats stop with it, and its claim is taken again START_RETRY_SECONDS after the last one (the
`start.created` crash point, docs/crash-points.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.utils import timezone

from cloudpivot.heartbeat import Heartbeat
from tasks.models import Attempt

HEARTBEAT_SECONDS = 1.0  # well under START_RETRY_SECONDS: a beat late by a loaded machine still counts


@contextmanager
def start_claim_held(attempt_id: int) -> Iterator[None]:
    """Renew the attempt's start claim every HEARTBEAT_SECONDS until the block ends."""

    def renew() -> None:  # a no-op once the attempt has its server or is closed; the beats go on until the end
        Attempt.objects.filter(pk=attempt_id, external_ref="", closed_at__isnull=True).update(updated_at=timezone.now())

    with Heartbeat(renew, interval=HEARTBEAT_SECONDS, name=f"start-claim-{attempt_id}", join_timeout=None):
        yield
