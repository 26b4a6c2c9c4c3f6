"""Shapes of the feed and webhook API."""

from __future__ import annotations

from rest_framework import serializers

from cloudpivot.json_types import JSONTypes
from notifications.models import DeliveryState, EmailPreference, FeedEvent, WebhookDelivery, WebhookEndpoint

MAX_WAIT_SECONDS = 30


class FeedQuerySerializer(serializers.Serializer):
    after = serializers.IntegerField(min_value=0, required=False, default=0, help_text="The cursor: entries after it.")
    limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=100)
    wait = serializers.FloatField(
        min_value=0,
        max_value=MAX_WAIT_SECONDS,
        required=False,
        default=0,
        help_text=f"Long-poll: hold the request up to this many seconds (at most {MAX_WAIT_SECONDS}) until an "
        "entry comes.",
    )
    type = serializers.ListField(
        child=serializers.RegexField(r"^[a-z_]+(\.[a-z_*]+)?$", max_length=64),
        required=False,
        default=list,
        help_text="Repeatable: task.state, operation.state, set.finished, task.*, set.* …",
    )
    project = serializers.ListField(
        child=serializers.SlugField(max_length=64), required=False, default=list, help_text="Repeatable."
    )
    task = serializers.UUIDField(required=False)
    instance = serializers.UUIDField(required=False)


class FeedEventSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(source="position", help_text="The cursor of this entry; strictly increasing.")
    time = serializers.DateTimeField(source="occurred_at")
    project = serializers.CharField(source="project.slug")
    task = serializers.UUIDField(source="task_id", allow_null=True)
    instance = serializers.UUIDField(source="instance_id", allow_null=True)
    operation = serializers.UUIDField(source="operation_id", allow_null=True)
    data = serializers.DictField(help_text="task.*: the TaskEvent's data with task_seq and task_state.")

    class Meta:
        model = FeedEvent
        fields = ["id", "type", "time", "project", "task", "instance", "operation", "message", "data"]
        read_only_fields = fields


class FeedPageSerializer(serializers.Serializer):
    events = FeedEventSerializer(many=True)
    next_after = serializers.IntegerField(help_text="Pass back as `after`; keep it to resume after a restart.")
    has_more = serializers.BooleanField()


class WebhookEndpointSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "project", "url", "event_types", "description", "is_active", "after_position", "created_at"]
        read_only_fields = fields


class WebhookEndpointCreatedSerializer(WebhookEndpointSerializer):
    secret = serializers.CharField(help_text="The signing secret, shown this once.")

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookEndpointInputSerializer(JSONTypes, serializers.Serializer):
    project = serializers.SlugField(max_length=64)
    url = serializers.URLField(max_length=2000, help_text="http:// or https:// only.")
    event_types = serializers.ListField(
        child=serializers.RegexField(r"^[a-z_]+(\.[a-z_*]+)?$", max_length=64),
        required=False,
        default=list,
        max_length=50,
        help_text="Empty: every event.",
    )
    description = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class WebhookEndpointUpdateSerializer(JSONTypes, serializers.Serializer):
    is_active = serializers.BooleanField(required=False)
    event_types = serializers.ListField(
        child=serializers.RegexField(r"^[a-z_]+(\.[a-z_*]+)?$", max_length=64), required=False, max_length=50
    )


class DeliveryQuerySerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=DeliveryState.choices, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=500, required=False, default=100)


class WebhookDeliverySerializer(serializers.ModelSerializer):
    webhook_id = serializers.CharField(read_only=True)
    event = serializers.IntegerField(source="event.position", read_only=True)
    type = serializers.CharField(source="event.type", read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "webhook_id",
            "event",
            "type",
            "state",
            "attempts",
            "last_status",
            "last_duration_ms",
            "last_error",
            "last_attempt_at",
            "next_attempt_at",
            "delivered_at",
        ]
        read_only_fields = fields


class EmailPreferenceSerializer(JSONTypes, serializers.ModelSerializer):
    """What you are emailed about (to your account's address); nothing until you ask."""

    email = serializers.EmailField(source="user.email", read_only=True)

    class Meta:
        model = EmailPreference
        fields = ["email", "task_end", "operation_failed"]
