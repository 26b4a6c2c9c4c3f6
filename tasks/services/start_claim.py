"""A start claim stays its worker's while the cloud is being asked: the worker renews it as it waits.

`starts_due` claims an attempt (STARTING, `updated_at` now) before its cloud is asked, and claims it
again once `updated_at` is START_RETRY_SECONDS (5 s) old: the start failed, or its worker died while
asking. A cloud that is merely slow (a Nova create may take longer than that) must not look like a dead
worker, or a second pass asks for a second server while the first call is still under way. So while
`ensure_started` runs, a thread of the worker's renews `updated_at` every HEARTBEAT_SECONDS. A dead
worker's beats stop with it, and its claim is taken again START_RETRY_SECONDS after the last one (the
`start.created` crash point, docs/crash-points.md).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection
from django.utils import timezone

from tasks.models import Attempt

logger = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 1.0  # well under START_RETRY_SECONDS: a beat late by a loaded machine still counts


@contextmanager
def start_claim_held(attempt_id: int) -> Iterator[None]:
    """Renew the attempt's start claim every HEARTBEAT_SECONDS until the block ends."""
    done = threading.Event()
    beats = threading.Thread(target=_beat, args=(attempt_id, done), name=f"start-claim-{attempt_id}", daemon=True)
    beats.start()
    try:
        yield
    finally:
        done.set()
        beats.join()


def _beat(attempt_id: int, done: threading.Event) -> None:
    try:
        while not done.wait(HEARTBEAT_SECONDS):
            Attempt.objects.filter(pk=attempt_id, external_ref="", closed_at__isnull=True).update(
                updated_at=timezone.now()
            )
    except Exception:  # the claim then ages as before: another pass may ask the cloud again (and adopt)
        logger.exception("could not renew the start claim of attempt %s", attempt_id)
    finally:
        connection.close()  # this thread's own
