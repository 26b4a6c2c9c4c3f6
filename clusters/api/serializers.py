from rest_framework import serializers

from clusters.choices import SubjectKind
from clusters.metrics.series import RESOLUTION_NAMES
from clusters.models import CloudConnection


class CloudConnectionSerializer(serializers.ModelSerializer):
    """What users may know of a connection: never where its credentials live."""

    class Meta:
        model = CloudConnection
        fields = [
            "cloud_id",
            "name",
            "backend",
            "endpoint",
            "scope",
            "dispatch_enabled",
            "max_active_tasks",
            "health_status",
            "health_message",
            "health_checked_at",
        ]
        read_only_fields = fields


class SeriesQuerySerializer(serializers.Serializer):
    """?metric=…: one sampled series instead of the cloud's current figures."""

    metric = serializers.RegexField(
        r"^[a-z0-9_]{1,64}$",
        required=False,
        help_text="e.g. queue_length, cpu_used_cores; without it, the current figures (not a series)",
    )
    subject_kind = serializers.ChoiceField(choices=SubjectKind.choices, default=SubjectKind.CONNECTION)
    subject_key = serializers.CharField(
        max_length=200, required=False, help_text="Node name, instance id or project slug; default: the cloud id."
    )
    since = serializers.DateTimeField(required=False, help_text="ISO 8601; default: 24 hours ago.")
    until = serializers.DateTimeField(required=False, help_text="ISO 8601; default: now.")
    resolution = serializers.ChoiceField(
        choices=list(RESOLUTION_NAMES), required=False, help_text="raw, 15m or 1h; default: the finest still kept."
    )

    def validate(self, attrs):
        # An empty window (since == until) is an honest question with no points; only a reversed one is wrong.
        if attrs.get("since") and attrs.get("until") and attrs["since"] > attrs["until"]:
            raise serializers.ValidationError({"since": "must not be after until"})
        if attrs.get("metric") and attrs["subject_kind"] != SubjectKind.CONNECTION and not attrs.get("subject_key"):
            raise serializers.ValidationError({"subject_key": f"name the {attrs['subject_kind']} to read"})
        return attrs
