"""The replayable event feed and the webhooks that push it (docs/api.md "Event feed", docs/webhooks.md)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from cloudpivot import secret_box
from cloudpivot.accounts.models import Project
from cloudpivot.common import BaseModel


class FeedEvent(models.Model):
    """One entry of the feed: a task event or an operation's state, copied when it happened.

    `position` is the cursor clients see. It is given by the sequencer after the writing transaction has
    committed, under one lock, so positions become visible strictly in order: a reader that has seen N
    never later finds an entry below N (an auto-increment id alone would: transactions commit out of order).
    The copy (not a reference) lets the feed keep its own retention, apart from the tasks'.
    """

    position = models.PositiveBigIntegerField(null=True, blank=True, unique=True)
    type = models.CharField(max_length=64)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    task_id = models.UUIDField(null=True, blank=True)
    instance_id = models.UUIDField(null=True, blank=True)
    operation_id = models.UUIDField(null=True, blank=True)
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()
    # What was copied ("task-event:<id>", "operation:<id>:<state>"), so a second capture adds nothing.
    source = models.CharField(max_length=120, unique=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "position"], name="notif_feed_project_position"),
            models.Index(fields=["task_id", "position"], name="notif_feed_task_position"),
            # the sequencer's queue: entries not yet given a position
            models.Index(fields=["id"], condition=Q(position__isnull=True), name="notif_feed_unsequenced"),
        ]

    def __str__(self) -> str:
        return f"#{self.position or '-'} {self.type}"


class FeedSequence(models.Model):
    """The single row whose lock orders the feed: the last position given and how far retention pruned."""

    last_position = models.PositiveBigIntegerField(default=0)
    pruned_through = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"feed at {self.last_position} (pruned through {self.pruned_through})"


class WebhookEndpoint(BaseModel):
    """A project's subscription: a URL and the event types pushed to it, signed with its secret."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=2000)
    event_types = models.JSONField(
        default=list, blank=True, help_text='Feed types ("task.state") or prefixes ("task.*"); empty: every event.'
    )
    description = models.CharField(max_length=200, blank=True)
    # The signing secret, "whsec_" + base64, encrypted at rest as project secrets are (cloudpivot/secret_box.py):
    # shown once to its creator, read in clear only to sign (`signing_secret`).
    secret = models.TextField(editable=False)
    # After a rotation the old secret signs too (a second signature) until then, so receivers can switch over.
    previous_secret = models.TextField(blank=True, editable=False)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=True)
    # Feed position this endpoint has been offered up to: deliveries are made for entries after it.
    after_position = models.PositiveBigIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    @property
    def signing_secret(self) -> str:
        return secret_box.decrypt(self.secret) if self.secret else ""

    @signing_secret.setter
    def signing_secret(self, value: str) -> None:
        self.secret = secret_box.encrypt(value) if value else ""

    @property
    def previous_signing_secret(self) -> str:
        return secret_box.decrypt(self.previous_secret) if self.previous_secret else ""

    def __str__(self) -> str:
        return f"{self.project.slug} → {self.url}"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "pending"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed (gave up)"


class WebhookDelivery(BaseModel):
    """One feed entry for one endpoint: its attempts, the last answer, and when to try again."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(FeedEvent, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # How long the last attempt took, from sending to the answer (or the failure), in milliseconds.
    last_duration_ms = models.PositiveIntegerField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event"], name="%(app_label)s_%(class)s_once_per_event")
        ]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="notif_delivery_due")]

    @property
    def webhook_id(self) -> str:
        """The Standard Webhooks `webhook-id`: the same on every retry, so receivers de-duplicate by it."""
        return f"msg_{self.id.hex}"


class TaskEndMail(models.TextChoices):
    NONE = "none", "never"
    ALL = "all", "when my tasks end"
    FAILURES = "failures", "when my tasks end other than SUCCEEDED"


class EmailPreference(models.Model):
    """What a user asked to be emailed about (nothing until they opt in)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_preference")
    task_end = models.CharField(max_length=16, choices=TaskEndMail.choices, default=TaskEndMail.NONE)
    operation_failed = models.BooleanField(default=False, help_text="Email when an instance operation I asked fails.")

    def __str__(self) -> str:
        return f"{self.user}: tasks {self.task_end}, operations {'on' if self.operation_failed else 'off'}"


class MailCursor(models.Model):
    """The single row saying up to which feed position emails were considered."""

    last_position = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"mail at {self.last_position}"
