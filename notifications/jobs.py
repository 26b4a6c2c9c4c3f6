"""django-q2 jobs of the feed and webhooks (the schedules are in cloudpivot/schedules.py)."""

from __future__ import annotations

import datetime as dt
import time

from django.conf import settings
from django.utils import timezone

from notifications import feed, mail, webhooks

PUMP_STEP_SECONDS = 0.5


def pump(seconds: float = 50) -> str:
    """For about `seconds`: bring the feed up to date, fan new entries out to endpoints, post what is due,
    send the mails people asked for.

    Started every minute; deliveries never wait for the request that caused their event. Two pumps at
    once are safe (rows are leased under skip-locked locks), only wasteful.
    """
    deadline = time.monotonic() + seconds
    made = tried = mailed = 0
    while True:
        feed.feed_refresh()
        made += webhooks.webhooks_fan_out()
        tried += webhooks.webhooks_deliver_due()
        mailed += mail.mails_send()
        if time.monotonic() + PUMP_STEP_SECONDS >= deadline:
            return f"{made} deliveries made, {tried} attempts, {mailed} mails"
        time.sleep(PUMP_STEP_SECONDS)


def prune() -> str:
    days = getattr(settings, "EVENT_FEED_RETENTION_DAYS", 30)
    return f"{feed.feed_prune(before=timezone.now() - dt.timedelta(days=days))} feed entries pruned"
