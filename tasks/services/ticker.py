"""The clock: one leased ticker runs reconcile passes about every half second, then hands over to its successor.

The ticker holds a lease and runs a pass about every half second for a minute, then
enqueues its successor, whatever happened meanwhile (a pass that raised, a database that
went away): only a ticker that finds another one holding the lease ends without one. A
ticker is also enqueued whenever a worker process starts, and the minute schedule restarts
the chain if it ever breaks; extra tickers find the lease held and end.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from tasks import dispatch
from tasks.models import Lease
from tasks.services.reconcile import reconcile_pass

logger = logging.getLogger(__name__)
TICK_INTERVAL_SECONDS = 0.5
# Short, and renewed every pass: a ticker killed with its worker blocks the next one only this long.
LEASE_SECONDS = 5


def ticker_run(*, seconds: float | None = None) -> str:
    """Run reconcile passes for about a minute (or `seconds`, without a successor) while holding the lease."""
    holder = f"{socket.gethostname()}:{os.getpid()}:{time.monotonic_ns()}"
    handed_over = False
    try:
        if not lease_acquire("ticker", holder):
            # A live ticker renews its lease every pass; one that died lets it expire. Look once more after that.
            time.sleep(LEASE_SECONDS + TICK_INTERVAL_SECONDS)
            if not lease_acquire("ticker", holder):
                handed_over = True
                return "another ticker holds the lease"
        passes, handed_over = _passes(holder, seconds)
        return f"lost the lease after {passes} passes" if handed_over else f"{passes} passes"
    except Exception:
        logger.exception("the ticker stopped early; its successor takes over")
        time.sleep(TICK_INTERVAL_SECONDS)  # a database that is down is not asked again at once
        raise
    finally:
        _release_quietly(holder)
        if seconds is None and not handed_over:
            dispatch.enqueue_tick()


def _passes(holder: str, seconds: float | None) -> tuple[int, bool]:
    """Passes until the deadline; (how many, whether another ticker took the lease meanwhile)."""
    deadline = time.monotonic() + (seconds if seconds is not None else settings.TICKER_SECONDS)
    passes = 0
    while time.monotonic() < deadline:
        done = reconcile_pass()
        if done:
            logger.info("reconcile pass: %s", done)
        passes += 1
        if not lease_acquire("ticker", holder):
            return passes, True
        time.sleep(TICK_INTERVAL_SECONDS)
    return passes, False


def _release_quietly(holder: str) -> None:
    try:
        lease_release("ticker", holder)
    except Exception:  # the lease expires by itself
        logger.exception("could not release the ticker lease")


def lease_acquire(name: str, holder: str) -> bool:
    """Take or renew the lease if it is free, expired, or already ours."""
    now = timezone.now()
    expires = now + dt.timedelta(seconds=LEASE_SECONDS)
    with transaction.atomic():
        free_or_mine = Q(expires_at__lt=now) | Q(holder=holder)
        updated = Lease.objects.filter(free_or_mine, name=name).update(holder=holder, expires_at=expires)
        if updated:
            return True
        try:
            with transaction.atomic():
                Lease.objects.create(name=name, holder=holder, expires_at=expires)
            return True
        except IntegrityError:
            return False


def lease_release(name: str, holder: str) -> None:
    Lease.objects.filter(name=name, holder=holder).delete()
