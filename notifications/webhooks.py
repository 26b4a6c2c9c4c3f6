"""Webhook endpoints and their deliveries: who may subscribe, what is sent, how it is signed and retried.

Delivery is at least once: a delivery row exists per (endpoint, feed entry) before anything is sent, a
worker leases it (next_attempt_at pushed ahead under a row lock), posts, and records the answer
(notifications/delivery.py; the post itself: notifications/http_post.py). A worker that
dies mid-post leaves the lease to run out, and the entry is sent again with the same `webhook-id`, which is
how receivers drop the repeat. Signatures follow Standard Webhooks (https://www.standardwebhooks.com/):
HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<body>" with the endpoint's secret.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import logging
import secrets
import uuid
from smtplib import SMTPException

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from cloudpivot import secret_box
from cloudpivot.accounts.models import Membership, Project, Role
from cloudpivot.accounts.selectors import project_role, projects_visible_to
from cloudpivot.exceptions import InvalidSpec, NotFound, PermissionDenied
from notifications.feed import entry_document, types_q
from notifications.http_post import private_targets_allowed, target_check, url_refusal
from notifications.models import DeliveryState, FeedEvent, FeedSequence, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

# Retry after 1, 2, 4, 8, 16, 30 s, 1, 2, 5, 10, 30 min, then hourly; a delivery still failing a day after
# it was made gives up. The minutes between 30 s and an hour keep a receiver that was down a few minutes from
# waiting an hour for its backlog.
BACKOFF_SECONDS = (1, 2, 4, 8, 16, 30, 60, 120, 300, 600, 1800)
LATER_SECONDS = 3600
GIVE_UP_AFTER = dt.timedelta(days=1)
LEASE_SECONDS = 30
ERROR_CHARS = 500


# ---------------------------------------------------------------- endpoints
def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def target_refusal(url: str) -> str | None:
    """Why CloudPivot will not post to `url` (None: it will). Only http(s); no address that is loopback, private,
    link-local or otherwise not global (an IPv4 one inside NAT64, 6to4 or IPv4-mapped IPv6 included) unless
    WEBHOOK_ALLOW_PRIVATE_TARGETS says so: the server must not be a way into its own network. Each post checks
    again, on the addresses it then connects to (notifications/http_post.py)."""
    refusal = url_refusal(url)
    if refusal or private_targets_allowed():
        return refusal
    return target_check(url)[1]


def _admin_project(*, user: AbstractBaseUser, slug: str) -> Project:
    project = projects_visible_to(user=user).filter(slug=slug).first()
    if project is None:
        raise InvalidSpec(f"project: no project {slug} of yours", errors=[{"field": "project", "message": "not found"}])
    if project_role(user=user, project=project) != Role.ADMIN:
        raise PermissionDenied(f"only an admin of {slug} may manage its webhooks")
    return project


def endpoints_visible_to(*, user: AbstractBaseUser) -> QuerySet[WebhookEndpoint]:
    """Endpoints of the projects the user administers (their secrets stay hidden all the same)."""
    endpoints = WebhookEndpoint.objects.select_related("project").order_by("-created_at")
    if user.is_superuser:
        return endpoints
    return endpoints.filter(project__memberships__user=user, project__memberships__role=Role.ADMIN)


def endpoint_get_for_admin(*, user: AbstractBaseUser, endpoint_id: str) -> WebhookEndpoint:
    try:
        uuid.UUID(str(endpoint_id))
    except ValueError:  # not an id at all: the same answer as a foreign one
        raise NotFound(f"webhook {endpoint_id} not found") from None
    endpoint = endpoints_visible_to(user=user).filter(pk=endpoint_id).first()
    if endpoint is None:
        raise NotFound(f"webhook {endpoint_id} not found")
    return endpoint


def webhook_endpoint_create(
    *, user: AbstractBaseUser, project: str, url: str, event_types: list[str], description: str = ""
) -> tuple[WebhookEndpoint, str]:
    """Subscribe `url` to the project's entries from now on; returns the endpoint and its secret (shown once)."""
    owner = _admin_project(user=user, slug=project)
    refusal = target_refusal(url)
    if refusal:
        raise InvalidSpec(f"url: {refusal}", errors=[{"field": "url", "message": refusal}])
    secret = new_secret()
    now_at = FeedSequence.objects.filter(pk=1).values_list("last_position", flat=True).first() or 0
    endpoint = WebhookEndpoint(
        project=owner,
        url=url,
        event_types=list(event_types),
        description=description,
        after_position=now_at,
        created_by=user if user.is_authenticated else None,
    )
    endpoint.signing_secret = secret
    endpoint.save(force_insert=True)
    return endpoint, secret


def webhook_endpoint_update(*, endpoint: WebhookEndpoint, **fields) -> WebhookEndpoint:
    """Pause or resume (`is_active`) or change `event_types`/`description`; the API and the portal both call it."""
    for field, value in fields.items():
        setattr(endpoint, field, value)
    endpoint.save(update_fields=[*fields, "updated_at"])
    return endpoint


def webhook_secret_rotate(*, endpoint: WebhookEndpoint) -> str:
    """A new secret; the old one keeps signing beside it for WEBHOOK_SECRET_OVERLAP_HOURS (24)."""
    hours = float(getattr(settings, "WEBHOOK_SECRET_OVERLAP_HOURS", 24))
    endpoint.previous_secret = endpoint.secret  # still encrypted: copied as it is
    endpoint.previous_secret_until = timezone.now() + dt.timedelta(hours=hours)
    secret = new_secret()
    endpoint.signing_secret = secret
    endpoint.save(update_fields=["secret", "previous_secret", "previous_secret_until", "updated_at"])
    return secret


def webhook_secrets_reencrypt() -> tuple[int, list[str]]:
    """Every endpoint's signing secrets under the first CLOUDPIVOT_SECRETS_KEY (a key rotation); how many were,
    and the endpoints no configured key opens."""
    done, unreadable = 0, []
    for endpoint in WebhookEndpoint.objects.iterator():
        fields = [field for field in ("secret", "previous_secret") if getattr(endpoint, field)]
        try:
            tokens = {field: secret_box.rotate(getattr(endpoint, field)) for field in fields}
        except secret_box.SecretUnreadable:
            unreadable.append(f"webhook {endpoint.pk}")
            continue
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(**tokens)
        done += 1
    return done, unreadable


def signing_secrets(endpoint: WebhookEndpoint) -> list[str]:
    overlap = (
        endpoint.previous_secret and endpoint.previous_secret_until and endpoint.previous_secret_until > timezone.now()
    )
    current = endpoint.signing_secret
    return [current, endpoint.previous_signing_secret] if overlap else [current]


# ---------------------------------------------------------------- fan-out and delivery
def webhooks_fan_out() -> int:
    """Make a delivery row for each new feed entry each active endpoint subscribed to."""
    made = 0
    for endpoint_id in WebhookEndpoint.objects.filter(is_active=True).values_list("pk", flat=True):
        with transaction.atomic():
            endpoint = WebhookEndpoint.objects.select_for_update(skip_locked=True).filter(pk=endpoint_id).first()
            if endpoint is None:
                continue
            entries = FeedEvent.objects.filter(project_id=endpoint.project_id, position__gt=endpoint.after_position)
            if endpoint.event_types:
                entries = entries.filter(types_q(endpoint.event_types))
            top = FeedSequence.objects.filter(pk=1).values_list("last_position", flat=True).first() or 0
            now = timezone.now()
            rows = [
                WebhookDelivery(endpoint=endpoint, event_id=pk, next_attempt_at=now)
                for pk in entries.filter(position__lte=top).order_by("position").values_list("pk", flat=True)
            ]
            WebhookDelivery.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
            endpoint.after_position = max(endpoint.after_position, top)
            endpoint.save(update_fields=["after_position"])
            made += len(rows)
    return made


def signature(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def payload(entry: FeedEvent) -> bytes:
    """The Standard Webhooks body: {"type", "timestamp", "data": the feed entry as GET /api/v1/events shows it}."""
    data = entry_document(entry)
    return json.dumps({"type": entry.type, "timestamp": data["time"], "data": data}).encode()


def endpoint_pause(*, endpoint: WebhookEndpoint, why: str) -> None:
    """Stop posting to an endpoint that has refused for a day, and tell the project's admins (once)."""
    if not WebhookEndpoint.objects.filter(pk=endpoint.pk, is_active=True).update(is_active=False):
        return
    admins = Membership.objects.filter(project_id=endpoint.project_id, role=Role.ADMIN).select_related("user")
    addresses = sorted({m.user.email for m in admins if m.user.email})
    if not addresses:
        return
    try:
        send_mail(
            f"[CloudPivot] webhook paused: {endpoint.url}",
            f"The webhook endpoint {endpoint.url} of project {endpoint.project.slug} was paused: {why}\n\n"
            f"Deliveries wait. Fix the receiver, then resume it (the portal's /webhooks/{endpoint.pk}/ page, or "
            f'PATCH /api/v1/webhooks/{endpoint.pk} {{"is_active": true}}) and redeliver what failed.\n',
            None,
            addresses,
        )
    except (SMTPException, OSError) as exc:
        logger.warning("could not tell the admins of %s that a webhook was paused: %s", endpoint.project.slug, exc)


def delivery_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send again now (same webhook-id), whatever its state."""
    delivery.state = DeliveryState.PENDING
    delivery.next_attempt_at = timezone.now()
    delivery.save(update_fields=["state", "next_attempt_at", "updated_at"])
    return delivery
