"""django-q2 jobs of the feed and webhooks (the schedules are in cloudpivot/schedules.py)."""

from __future__ import annotations

import datetime as dt
import time

from django.conf import settings
from django.utils import timezone

from notifications import feed, mail, webhooks

PUMP_STEP_SECONDS = 0.5
# An idle pump looks less and less often (0.5, 1, 2, 4, 5 s): an idle CloudPivot must cost next to nothing.
PUMP_IDLE_MAX_SECONDS = 5.0


def pump(seconds: float = 50) -> str:
    """For about `seconds`: bring the feed up to date, fan new entries out to endpoints, post what is due,
    send the mails people asked for.

    Started every minute; deliveries never wait for the request that caused their event. Two pumps at
    once are safe (rows are leased under skip-locked locks), only wasteful.
    """
    deadline = time.monotonic() + seconds
    made = tried = mailed = 0
    step = PUMP_STEP_SECONDS
    while True:
        sequenced = feed.feed_refresh()
        done = (webhooks.webhooks_fan_out(), webhooks.webhooks_deliver_due(), mail.mails_send())
        made, tried, mailed = made + done[0], tried + done[1], mailed + done[2]
        step = PUMP_STEP_SECONDS if sequenced or any(done) else min(step * 2, PUMP_IDLE_MAX_SECONDS)
        if time.monotonic() + step >= deadline:
            return f"{made} deliveries made, {tried} attempts, {mailed} mails"
        time.sleep(step)


def prune() -> str:
    days = getattr(settings, "EVENT_FEED_RETENTION_DAYS", 30)
    return f"{feed.feed_prune(before=timezone.now() - dt.timedelta(days=days))} feed entries pruned"
