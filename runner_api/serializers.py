"""Shapes of the Runner protocol (docs/runner.md)."""

from __future__ import annotations

import base64
import binascii

from rest_framework import serializers

from tasks.models import LogStream
from tasks.services.runner_reports import EVENT_TYPES

MAX_LOG_CHUNK_BYTES = 1024 * 1024


class HeartbeatInputSerializer(serializers.Serializer):
    boot_id = serializers.CharField(max_length=64, allow_blank=True, required=False, default="")
    pid = serializers.IntegerField(required=False, allow_null=True, default=None)
    child = serializers.DictField(required=False, default=dict)
    usage = serializers.DictField(required=False, default=dict)


class RunnerEventSerializer(serializers.Serializer):
    seq = serializers.IntegerField(min_value=1)
    type = serializers.ChoiceField(choices=sorted(EVENT_TYPES))
    time = serializers.CharField(required=False, allow_blank=True, default="")
    data = serializers.DictField(required=False, default=dict)


class EventsInputSerializer(serializers.Serializer):
    events = RunnerEventSerializer(many=True, allow_empty=True)

    def validate_events(self, value):
        if len(value) > 1000:
            raise serializers.ValidationError("at most 1000 events per batch")
        return value


class LogsInputSerializer(serializers.Serializer):
    stream = serializers.ChoiceField(choices=LogStream.choices)
    offset = serializers.IntegerField(min_value=0)
    data = serializers.CharField(allow_blank=True, trim_whitespace=False)

    def validate_data(self, value: str) -> bytes:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError("must be base64") from None
        if len(raw) > MAX_LOG_CHUNK_BYTES:
            raise serializers.ValidationError(f"at most {MAX_LOG_CHUNK_BYTES} bytes per chunk")
        return raw


# ---------------------------------------------------------------------------- protocol v2: POST /runner/v2/sync
MAX_SYNC_ATTEMPTS = 1000
MAX_LONG_POLL_SECONDS = 60


class SyncAgentSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, allow_blank=True, required=False, default="")
    boot_id = serializers.CharField(max_length=64, allow_blank=True, required=False, default="")
    version = serializers.CharField(max_length=32, allow_blank=True, required=False, default="")
    pid = serializers.IntegerField(required=False, allow_null=True, default=None)


class SyncAttemptSerializer(serializers.Serializer):
    attempt = serializers.CharField(max_length=63)
    events = RunnerEventSerializer(many=True, required=False, default=list)
    logs = LogsInputSerializer(many=True, required=False, default=list)
    usage = serializers.DictField(required=False, default=dict)

    def validate_events(self, value):
        return EventsInputSerializer.validate_events(self, value)


class SyncInputSerializer(serializers.Serializer):
    protocol = serializers.ChoiceField(choices=[2])
    agent = SyncAgentSerializer(required=False, default=dict)
    known = serializers.ListField(
        child=serializers.CharField(max_length=63), required=False, default=list, max_length=10000
    )
    stopping = serializers.ListField(
        child=serializers.CharField(max_length=63), required=False, default=list, max_length=10000
    )
    attempts = SyncAttemptSerializer(many=True, required=False, default=list, max_length=MAX_SYNC_ATTEMPTS)
    # Closed attempts whose run directory the agent removed (issue 11: the agent confirms local cleanup).
    cleaned = serializers.ListField(
        child=serializers.CharField(max_length=63), required=False, default=list, max_length=10000
    )
    wait = serializers.FloatField(min_value=0, max_value=MAX_LONG_POLL_SECONDS, required=False, default=0)
