"""django-q2 jobs of the feed and webhooks (the schedules are in cloudpivot/schedules.py)."""

from __future__ import annotations

import datetime as dt
import time

from django.conf import settings
from django.utils import timezone

from notifications import delivery, feed, mail, webhooks

PUMP_STEP_SECONDS = 0.5
# An idle pump looks less and less often (0.5, 1, 2, 4, 5 s): an idle CloudPivot must cost next to nothing.
PUMP_IDLE_MAX_SECONDS = 5.0


def pump(seconds: float = 50) -> str:
    """For about `seconds`: bring the feed up to date, fan new entries out to endpoints, post what is due,
    send the mails people asked for.

    Started every minute; deliveries never wait for the request that caused their event. Posts run in the
    Deliverer's threads while this loop goes on (a slow receiver holds up neither the others nor the mails);
    at the end the pump waits for the turns in flight (at most POST_IN_TURN_SECONDS and a deadline: the
    job's timeout leaves room). Two pumps at once are safe (rows are leased under skip-locked locks), only
    wasteful.
    """
    deadline = time.monotonic() + seconds
    made = tried = mailed = 0
    step = PUMP_STEP_SECONDS
    deliverer = delivery.Deliverer()
    try:
        while True:
            sequenced = feed.feed_refresh()
            done = (webhooks.webhooks_fan_out(), deliverer.step(), mail.mails_send())
            made, tried, mailed = made + done[0], tried + done[1], mailed + done[2]
            busy = sequenced or any(done) or deliverer.busy
            step = PUMP_STEP_SECONDS if busy else min(step * 2, PUMP_IDLE_MAX_SECONDS)
            if time.monotonic() + step >= deadline:
                return f"{made} deliveries made, {tried} attempts, {mailed} mails"
            time.sleep(step)
    finally:
        deliverer.close()


def prune() -> str:
    days = getattr(settings, "EVENT_FEED_RETENTION_DAYS", 30)
    return f"{feed.feed_prune(before=timezone.now() - dt.timedelta(days=days))} feed entries pruned"
