"""JSON types held to in request bodies: `{"name": 0}` is a 400 naming `name`, not the string "0".

DRF's fields coerce: a CharField takes 0 as "0", a BooleanField takes 0, "yes" or "off", an IntegerField
takes "12". The schema promises a string, a boolean, an integer, so a client generated from it (or a YAML
file where `name: 0` is a number) must hear that its value has the wrong type instead of having it
silently turned into something else. Query strings are text by nature and are left to the fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import QueryDict
from rest_framework import serializers

# Most specific first: a field's class is matched against these in order.
_EXPECTED: list[tuple[type, tuple[type, ...], str]] = [
    (serializers.BooleanField, (bool,), "must be true or false"),
    (serializers.JSONField, (object,), ""),
    (serializers.CharField, (str,), "must be a string"),
    (serializers.UUIDField, (str,), "must be a string (a UUID)"),
    (serializers.DateTimeField, (str,), "must be a string (ISO 8601)"),
    (serializers.ChoiceField, (str,), "must be a string"),
    (serializers.IntegerField, (int,), "must be a whole number"),
    (serializers.FloatField, (int, float), "must be a number"),
    (serializers.DecimalField, (int, float, str), "must be a number"),
    (serializers.ListField, (list,), "must be a list"),
    (serializers.ListSerializer, (list,), "must be a list"),
    (serializers.DictField, (dict,), "must be an object"),
    (serializers.Serializer, (dict,), "must be an object"),
]


def type_problem(field: serializers.Field, value: Any) -> str | dict[int, list[str]] | None:
    """Why `value` is not of the JSON type `field` reads (None: it is, or the field decides itself); for a list,
    the items at fault by index (so the error names `command.1`)."""
    if value is None:
        return None  # the field's own allow_null answers ("may not be null")
    for field_class, types, message in _EXPECTED:
        if isinstance(field, field_class):
            if isinstance(value, bool) and bool not in types and object not in types:
                return message  # True is an int to Python, not a number to JSON
            if isinstance(field, serializers.ChoiceField) and not all(isinstance(c, str) for c in field.choices):
                return None
            if not isinstance(value, types):
                return message
            child = getattr(field, "child", None)
            if isinstance(field, serializers.ListField) and child is not None:
                wrong = {index: problem for index, item in enumerate(value) if (problem := type_problem(child, item))}
                return {index: [p] if isinstance(p, str) else p for index, p in wrong.items()} or None
            return None
    return None


class JSONTypes:
    """Serializer mixin: each field given in a JSON (or YAML) body must hold its JSON type (see module doc)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            wrong = {
                name: [problem] if isinstance(problem, str) else problem
                for name, field in self.fields.items()
                if not field.read_only and name in data and (problem := type_problem(field, data[name]))
            }
            if wrong:
                raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)
