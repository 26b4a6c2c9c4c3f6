"""Posting the due webhook deliveries: leased, posted from a few threads, recorded.

A delivery is leased (next_attempt_at pushed LEASE_SECONDS ahead under a skip-locked row lock), posted by
http_post.post (one lookup, a checked address, a deadline), and its outcome recorded: taken, or retried after
the backoff of webhooks.BACKOFF_SECONDS, or failed a day after it was made (the endpoint is then paused).
Deliveries of different endpoints are posted side by side; one endpoint's never two at once.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from notifications import http_post
from notifications.models import DeliveryState, WebhookDelivery, WebhookEndpoint
from notifications.webhooks import (
    BACKOFF_SECONDS,
    ERROR_CHARS,
    GIVE_UP_AFTER,
    LATER_SECONDS,
    LEASE_SECONDS,
    endpoint_pause,
    payload,
    signature,
    signing_secrets,
)

logger = logging.getLogger(__name__)

# Posting threads per pump: up to this many endpoints are posted to at once, one delivery each at a time.
POST_WORKERS = 4
# One endpoint's leased deliveries are posted in turn: at most this many per lease, and none is started once
# this long has passed (each post ends within http_post.DEADLINE_SECONDS: all end within the lease).
IN_TURN_MAX = 20
POST_IN_TURN_SECONDS = LEASE_SECONDS - http_post.DEADLINE_SECONDS - 5


def post_headers(endpoint: WebhookEndpoint, webhook_id: str, body: bytes) -> dict[str, str]:
    timestamp = int(time.time())
    return {
        "Content-Type": "application/json",
        "User-Agent": "CloudPivot-Webhooks/1",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            signature(secret, webhook_id, timestamp, body) for secret in signing_secrets(endpoint)
        ),
    }


def next_delay(attempts: int) -> int:
    return BACKOFF_SECONDS[attempts - 1] if attempts <= len(BACKOFF_SECONDS) else LATER_SECONDS


@dataclass(frozen=True)
class Post:
    """One delivery ready to post: what the posting thread needs, read from the database beforehand."""

    delivery_id: uuid.UUID
    url: str
    headers: dict[str, str]
    body: bytes

    @classmethod
    def of(cls, delivery: WebhookDelivery) -> Post:
        body = payload(delivery.event)
        return cls(delivery.pk, delivery.endpoint.url, post_headers(delivery.endpoint, delivery.webhook_id, body), body)


@dataclass(frozen=True)
class Outcome:
    """What one post of one delivery came to (made in a posting thread, recorded by the pump's own thread)."""

    delivery_id: uuid.UUID
    status: int | None
    error: str
    duration_ms: int

    @property
    def took(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def post_in_turn(posts: list[Post]) -> list[Outcome]:
    """One endpoint's leased deliveries, posted one after the other (in a posting thread: no database here).

    The turn ends early, handing back the ones not started, after a post that ran out its deadline (that
    receiver will not do better for the next one now) or once POST_IN_TURN_SECONDS have passed (so each post
    ends within its lease).
    """
    began = time.monotonic()
    outcomes = []
    for post in posts:
        if time.monotonic() - began > POST_IN_TURN_SECONDS:
            break
        started = time.monotonic()
        try:
            status, error = http_post.post(post.url, post.headers, post.body)
        except Exception as exc:  # a bug of ours must cost this delivery an attempt, never the pump
            logger.exception("posting delivery %s failed", post.delivery_id)
            status, error = None, f"not sent: {type(exc).__name__}: {exc}"
        took = time.monotonic() - started
        outcomes.append(Outcome(post.delivery_id, status, error, round(took * 1000)))
        if took >= http_post.DEADLINE_SECONDS:
            break
    return outcomes


class Deliverer:
    """Posts the due deliveries from a few threads (POST_WORKERS), one endpoint's in turn and never two of one
    endpoint at once: a slow or hostile receiver holds one thread for at most its deadline and delays no other
    endpoint. The rows are leased and recorded by the caller's thread (the pump's); the threads only post.

    `step()` records what has finished and starts what is due for the endpoints with nothing in flight;
    `close()` waits for the turns in flight and records them.
    """

    def __init__(self, *, workers: int = POST_WORKERS) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="webhook-post")
        self.in_flight: dict[uuid.UUID, tuple[Future, list[uuid.UUID]]] = {}

    @property
    def busy(self) -> bool:
        return bool(self.in_flight)

    def step(self, *, limit: int = 50) -> int:
        """Record finished posts, lease and start due ones; returns how many deliveries were started."""
        self.collect()
        leased = lease_due(limit=limit, skip_endpoints=set(self.in_flight))
        for endpoint_id, deliveries in leased.items():
            future = self.pool.submit(post_in_turn, [Post.of(delivery) for delivery in deliveries])
            self.in_flight[endpoint_id] = (future, [d.pk for d in deliveries])
        return sum(len(deliveries) for deliveries in leased.values())

    def collect(self, *, wait: bool = False) -> int:
        """Record the posts that have finished (all of them with `wait`); returns how many were recorded."""
        recorded = 0
        for endpoint_id, (future, leased) in list(self.in_flight.items()):
            if not (wait or future.done()):
                continue
            del self.in_flight[endpoint_id]
            outcomes = future.result()
            for outcome in outcomes:
                delivery_record(outcome)
            recorded += len(outcomes)
            tried = {outcome.delivery_id for outcome in outcomes}
            untried = [pk for pk in leased if pk not in tried]
            WebhookDelivery.objects.filter(pk__in=untried, state=DeliveryState.PENDING).update(
                next_attempt_at=timezone.now()
            )
        return recorded

    def close(self) -> None:
        """Wait for the turns in flight (each ends within POST_IN_TURN_SECONDS and a deadline) and record them."""
        try:
            self.collect(wait=True)
        finally:
            self.pool.shutdown(wait=True)


def lease_due(*, limit: int, skip_endpoints: set[uuid.UUID]) -> dict[uuid.UUID, list[WebhookDelivery]]:
    """Lease up to `limit` due deliveries (at most IN_TURN_MAX per endpoint, none of `skip_endpoints`'), oldest
    first, by endpoint: next_attempt_at pushed LEASE_SECONDS ahead under skip-locked row locks."""
    now = timezone.now()
    with transaction.atomic():
        due = list(
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .filter(state=DeliveryState.PENDING, next_attempt_at__lte=now, endpoint__is_active=True)
            .exclude(endpoint_id__in=skip_endpoints)
            .order_by("next_attempt_at")
            .values_list("pk", "endpoint_id")[:limit]
        )
        chosen: dict[uuid.UUID, list[uuid.UUID]] = {}
        for pk, endpoint_id in due:
            if len(chosen.setdefault(endpoint_id, [])) < IN_TURN_MAX:
                chosen[endpoint_id].append(pk)
        ids = [pk for pks in chosen.values() for pk in pks]
        WebhookDelivery.objects.filter(pk__in=ids).update(next_attempt_at=now + dt.timedelta(seconds=LEASE_SECONDS))
    rows = WebhookDelivery.objects.select_related("endpoint", "event__project").in_bulk(ids)
    return {endpoint_id: [rows[pk] for pk in pks] for endpoint_id, pks in chosen.items()}


def webhooks_deliver_due(*, limit: int = 50) -> int:
    """Post the deliveries that are due, each under a lease, and wait for them; returns how many were tried."""
    deliverer = Deliverer()
    try:
        return deliverer.step(limit=limit)
    finally:
        deliverer.close()


def delivery_record(outcome: Outcome) -> None:
    """Write down one post's outcome: taken, or the next try after the backoff, or failed after a day."""
    delivery = WebhookDelivery.objects.select_related("endpoint__project").filter(pk=outcome.delivery_id).first()
    if delivery is None:  # deleted with its endpoint meanwhile
        return
    now = timezone.now()
    delivery.attempts += 1
    delivery.last_status = outcome.status
    delivery.last_duration_ms = outcome.duration_ms
    delivery.last_attempt_at = now
    if outcome.took:
        delivery.state = DeliveryState.SUCCEEDED
        delivery.delivered_at = now
        delivery.last_error = ""
    else:
        delivery.last_error = outcome.error[:ERROR_CHARS]
        retry_at = now + dt.timedelta(seconds=next_delay(delivery.attempts))
        if retry_at - delivery.created_at > GIVE_UP_AFTER:
            delivery.state = DeliveryState.FAILED
            endpoint_pause(endpoint=delivery.endpoint, why=f"a delivery failed for a day: {delivery.last_error}")
        delivery.next_attempt_at = retry_at
    delivery.save(
        update_fields=[
            "attempts",
            "last_status",
            "last_duration_ms",
            "last_attempt_at",
            "state",
            "delivered_at",
            "last_error",
            "next_attempt_at",
            "updated_at",
        ]
    )
