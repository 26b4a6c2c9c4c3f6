"""The task set request: its shape, checked before any element is looked at.

`items` is read as plain JSON and checked here as a whole (a list of at most TASK_SET_MAX_ELEMENTS), not through
a serializer field per item: DRF's per-item machinery would cost seconds for 100,000 items. Each item is then
checked by tasksets.templating, which names `items.17.lr`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from rest_framework import serializers

from cloudpivot.api import flatten_errors
from cloudpivot.exceptions import ApplicationError, InvalidSpec
from tasks.specs import StrictSerializer


class TaskSetRequestSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    template = serializers.JSONField()
    # Absent is None; an explicit null is refused, as the schema says (a number, or a list).
    count = serializers.IntegerField(min_value=1, required=False, default=None)
    items = serializers.JSONField(required=False, default=None)
    max_running = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)

    def validate_template(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a task document (an object with cloud, command …)")
        return value

    def validate_count(self, value: int | None) -> int | None:
        limit = settings.TASK_SET_MAX_ELEMENTS
        if value is not None and value > limit:
            raise serializers.ValidationError(f"at most {limit} elements in one set (this one has {value})")
        return value

    def validate_items(self, value: Any) -> list[Any] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            raise serializers.ValidationError("must be a non-empty list of parameter objects")
        limit = settings.TASK_SET_MAX_ELEMENTS
        if len(value) > limit:
            raise serializers.ValidationError(f"at most {limit} elements in one set (this one has {len(value)})")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if (attrs["count"] is None) == (attrs["items"] is None):
            raise serializers.ValidationError({"count": ["give either count (a number of elements) or items"]})
        return attrs


def set_request_check(body: Any) -> dict[str, Any]:
    """The request's fields with defaults, or InvalidSpec naming each field at fault."""
    serializer = TaskSetRequestSerializer(data=body)
    if not serializer.is_valid():
        errors = flatten_errors(serializer.errors)
        where = f"{errors[0]['field']}: " if errors[0]["field"] else ""
        raise InvalidSpec(f"invalid task set: {where}{errors[0]['message']}", errors=errors)
    return dict(serializer.validated_data)


@contextmanager
def fields_under(prefix: str) -> Iterator[None]:
    """Errors raised inside name their fields under `prefix` (`command.1` → `template.command.1`)."""
    try:
        yield
    except ApplicationError as exc:
        exc.errors = [{**e, "field": f"{prefix}.{e['field']}" if e["field"] else prefix} for e in exc.errors]
        if isinstance(exc, InvalidSpec) and exc.errors:
            exc.message = f"invalid task set: {exc.errors[0]['field']}: {exc.errors[0]['message']}"
        raise
