"""Shapes of the outputs API (docs/api.md)."""

from __future__ import annotations

from rest_framework import serializers

from results.choices import ManifestState, OutputState


class OutputsQuerySerializer(serializers.Serializer):
    attempt = serializers.IntegerField(
        min_value=1,
        max_value=32767,
        required=False,
        allow_null=True,
        default=None,
        help_text="Attempt number (default: the latest).",
    )


class DeclaredOutputSerializer(serializers.Serializer):
    path = serializers.CharField()
    to = serializers.CharField(required=False)


class OutputFileSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="Relative name: the path in the work directory, or under `to`.")
    state = serializers.ChoiceField(choices=OutputState.choices)
    bytes = serializers.IntegerField(allow_null=True)
    sha256 = serializers.CharField(help_text="SHA-256 of the bytes, computed while they were stored.")
    reason = serializers.CharField(help_text="Why a missing output was not kept; empty for a stored one.")
    url = serializers.CharField(required=False, help_text="A signed download link (stored outputs only).")
    expires_at = serializers.DateTimeField(required=False, help_text="When the link stops working.")


class TaskOutputsSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(allow_null=True, help_text="The attempt number (null: none yet).")
    declared = DeclaredOutputSerializer(many=True)
    state = serializers.ChoiceField(
        choices=[*ManifestState.choices, ("pending", "Pending"), ("none", "None")],
        help_text="complete or incomplete once reported; pending while the attempt runs; none: nothing declared "
        "or nothing reported.",
    )
    reason = serializers.CharField(required=False)
    store = serializers.CharField(required=False)
    reported_at = serializers.DateTimeField(required=False)
    files = OutputFileSerializer(many=True)
