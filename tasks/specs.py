"""The task document: validation and normalization, shared by the API, the pages and the CLI."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from rest_framework import serializers

from cloudpivot.api import flatten_errors
from cloudpivot.exceptions import InvalidSpec

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_TIMEOUT_SECONDS = 30 * 24 * 3600


class StringListField(serializers.ListField):
    """A list of strings, and nothing else: no numbers turned into strings, no single string split up."""

    child = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=131072)

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, str):
            raise serializers.ValidationError('must be a list of strings, e.g. ["echo", "hello"], not one string')
        if isinstance(data, list):
            bad = [i for i, item in enumerate(data) if not isinstance(item, str)]
            if bad:
                raise serializers.ValidationError({i: ["must be a string"] for i in bad})
        return super().to_internal_value(data)


class StringMapField(serializers.DictField):
    child = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=32768)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        if isinstance(data, dict):
            bad = {key: ["must be a string"] for key, value in data.items() if not isinstance(value, str)}
            if bad:
                raise serializers.ValidationError(bad)
        return super().to_internal_value(data)


class ResourcesSerializer(serializers.Serializer):
    cpu = serializers.FloatField(min_value=0.001, max_value=1024, required=False)
    memory_mb = serializers.IntegerField(min_value=1, max_value=16 * 1024 * 1024, required=False)
    gpu = serializers.IntegerField(min_value=0, max_value=64, required=False, default=0)


class StrictSerializer(serializers.Serializer):
    """Refuses unknown fields, so a typo (`comand`) is an error instead of being silently ignored."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["the task document must be a JSON object"]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({key: ["unknown field"] for key in unknown})
        return super().to_internal_value(data)


class TaskSpecSerializer(StrictSerializer):
    cloud = serializers.SlugField(max_length=64)
    project = serializers.SlugField(max_length=64, required=False)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    command = StringListField(min_length=1, max_length=4096)
    image = serializers.CharField(max_length=500, required=False, allow_null=True, default=None)
    env = StringMapField(required=False, default=dict)
    workdir = serializers.CharField(max_length=1000, required=False, allow_null=True, default=None)
    resources = ResourcesSerializer(required=False)
    timeout_seconds = serializers.IntegerField(
        min_value=1, max_value=MAX_TIMEOUT_SECONDS, required=False, allow_null=True, default=None
    )
    retry_limit = serializers.IntegerField(min_value=0, max_value=20, required=False, default=0)
    labels = StringMapField(required=False, default=dict)

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        bad = [key for key in value if not ENV_NAME.match(key)]
        if bad:
            raise serializers.ValidationError(f"not a valid environment variable name: {', '.join(bad)}")
        if len(value) > 500:
            raise serializers.ValidationError("at most 500 variables")
        return value

    def validate_workdir(self, value: str | None) -> str | None:
        if value and not value.startswith("/"):
            raise serializers.ValidationError("must be an absolute path")
        return value


def spec_sha256(document: dict[str, Any]) -> str:
    """Hash of the canonical JSON form, so whitespace or key order do not make two bodies differ."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def spec_normalize(document: Any) -> dict[str, Any]:
    """Validate a submitted document and return it with defaults filled in; raise InvalidSpec naming each field."""
    serializer = TaskSpecSerializer(data=document)
    if not serializer.is_valid():
        errors = flatten_errors(serializer.errors)
        first = errors[0]
        where = f"{first['field']}: " if first["field"] else ""
        raise InvalidSpec(f"invalid task document: {where}{first['message']}", errors=errors)
    normalized = dict(serializer.validated_data)
    normalized["resources"] = dict(normalized.get("resources") or {"gpu": 0})
    return normalized
