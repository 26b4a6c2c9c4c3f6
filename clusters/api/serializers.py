from rest_framework import serializers

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
