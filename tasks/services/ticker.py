"""The clock: one leased ticker runs reconcile passes when something is due, then hands over to its successor.

The ticker holds a lease for about a minute, then enqueues its successor, whatever happened meanwhile
(a pass that raised, a database that went away): only a ticker that finds another one holding the
lease ends without one. A ticker is also enqueued whenever a worker process starts, and the minute
schedule restarts the chain if it ever breaks; extra tickers find the lease held and end.

It does not run passes for nothing (issue 11: an idle installation costs next to nothing). Between
passes it sleeps on the reconcile doorbell (cloudpivot/realtime.py), which whoever makes work rings
after commit, and wakes by itself when `reconcile_due_at` says a deadline or an observation is due,
at the latest every IDLE_SECONDS for that cheap look and the lease. Passes are at least
TICK_INTERVAL_SECONDS apart unless the doorbell rang, so a cloud that keeps failing is not asked in
a loop.

Each connection's cloud calls run in the ticker's pool of threads (tasks/services/connection_work.py),
one batch in flight per connection, and a pass waits for them a bounded time (issue 16). A thread of the
ticker renews the lease every LEASE_RENEW_SECONDS for as long as it runs, its passes and its last wait
for its batches included, so a long pass never lets a second ticker in beside it; a ticker that dies
stops renewing with it.
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

from cloudpivot.heartbeat import Heartbeat
from cloudpivot.realtime import ReconcileDoorbell
from tasks import dispatch
from tasks.models import Lease
from tasks.services.connection_work import ConnectionWorkers
from tasks.services.reconcile import reconcile_due_at, reconcile_pass

logger = logging.getLogger(__name__)
TICK_INTERVAL_SECONDS = 0.5
# The longest sleep without a look at what is due: long enough to cost nothing.
IDLE_SECONDS = 2.0
# Short, and renewed every LEASE_RENEW_SECONDS (a Heartbeat): a ticker killed with its worker blocks the next one only
# this long.
LEASE_SECONDS = 5
LEASE_RENEW_SECONDS = 1.0


def ticker_run(*, seconds: float | None = None) -> str:
    """Run reconcile passes for about a minute (or `seconds`, without a successor) while holding the lease."""
    holder = f"{socket.gethostname()}:{os.getpid()}:{time.monotonic_ns()}"
    handed_over = False
    try:
        if not lease_acquire("ticker", holder):
            # A live ticker renews its lease every second; one that died lets it expire. Look once more after that.
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
    passes, last_pass = 0, None
    rang = False
    # Renewed from the moment it is held; left in reverse order, so the workers' last wait runs while it is kept.
    # A beat stuck past the lease's length keeps nothing: the join is bounded by it (unbounded, a renewal
    # blocked on a row lock held the ticker, and its successor's enqueue, for ever).
    renewal = Heartbeat(
        lambda: lease_acquire("ticker", holder),
        interval=LEASE_RENEW_SECONDS,
        name="lease-ticker",
        join_timeout=LEASE_SECONDS,
    )
    with renewal as lease, ReconcileDoorbell() as doorbell, ConnectionWorkers() as workers:
        while time.monotonic() < deadline and not lease.ended:
            now = timezone.now()
            # A new ticker runs one pass at once: work may have been left while there was none.
            due_at = reconcile_due_at(last_pass=last_pass, now=now) if last_pass is not None else now
            if due_at is not None and last_pass is not None and not rang:
                due_at = max(due_at, last_pass + dt.timedelta(seconds=TICK_INTERVAL_SECONDS))
            rang = False
            delay = IDLE_SECONDS
            if due_at is not None and due_at <= now:
                done = reconcile_pass(workers=workers)
                if done:
                    logger.info("reconcile pass: %s", done)
                passes += 1
                last_pass = timezone.now()
                delay = 0.0  # look again: the pass may have made work due at once (an attempt to start)
            elif due_at is not None:
                delay = min(IDLE_SECONDS, (due_at - now).total_seconds())
            rang = doorbell.wait(max(0.0, min(delay, deadline - time.monotonic())))
    return passes, lease.ended


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
