"""The task document: validation and normalization, shared by the API, the pages and the CLI."""

from __future__ import annotations

import re
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from cloudpivot.api import flatten_errors
from cloudpivot.exceptions import InvalidSpec
from cloudpivot.json_types import JSONTypes
from clusters.data_refs import DATA_KINDS, DIR, ENV_PREFIX, MAX_DATA, PVC, SCRATCH
from clusters.egress import DEFAULT, MAX_DESTINATIONS, NONE, destinations_normalize
from tasks.choices import MAX_INTERRUPT_LIMIT, OnInterrupt
from tasks.stop_grace import MAX_STOP_GRACE_SECONDS

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_TIMEOUT_SECONDS = 30 * 24 * 3600
MAX_DEBUG_HOLD_MINUTES = 7 * 24 * 60  # clusters.debug_hold.MAX_MINUTES: a connection may allow less
# A Kubernetes object name (DNS-1123 label), e.g. a PersistentVolumeClaim's.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A Kubernetes label key (optional DNS prefix + name) and value.
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
# Written as validators (not only validate_* methods) so the OpenAPI schema states them as `pattern`s.
ABSOLUTE_PATH = RegexValidator(r"^/[^\x00]*$", "must be an absolute path")
ENV_NAME_VALID = RegexValidator(ENV_NAME.pattern, "not a valid environment variable name")
# The absolute path of a file: "/"-separated parts, none empty, "." or "..", no NUL, not ending in "/".
FILE_PATH = RegexValidator(
    r"^(/([^/.\x00][^/\x00]*|\.[^/.\x00][^/\x00]*|\.\.[^/\x00]+))+$",
    "must be the absolute path of a file, e.g. /run/secrets/db-password, without '.' or '..' parts",
)


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


NETWORK_SCHEMA = {
    "oneOf": [
        {"type": "string", "enum": [NONE, DEFAULT]},
        {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_DESTINATIONS,
            "items": {"type": "string", "maxLength": 200},
            "description": "Destinations: a CIDR or address, with an optional port (10.0.0.0/8, 192.0.2.7:443, "
            "[2001:db8::/32]:443).",
        },
    ]
}


@extend_schema_field(NETWORK_SCHEMA)
class NetworkField(serializers.Field):
    """`network`: "none", "default" (the connection's policy decides) or a list of destinations (clusters/egress.py).

    Each wrong destination is named by its place (`network.2`); a list comes back normalized (10.0.0.7 becomes
    10.0.0.7/32)."""

    def to_internal_value(self, data: Any) -> Any:
        if data in (NONE, DEFAULT):
            return data
        if isinstance(data, str):
            raise serializers.ValidationError(
                f'must be "none", "default" or a list of destinations such as ["10.0.0.0/8:443"], not {data!r}'
            )
        if isinstance(data, list) and any(not isinstance(item, str) or len(item) > 200 for item in data):
            bad = [i for i, item in enumerate(data) if not isinstance(item, str) or len(item) > 200]
            raise serializers.ValidationError(
                {i: ["must be a destination string of at most 200 characters"] for i in bad}
            )
        destinations, problems = destinations_normalize(data)
        if -1 in problems:
            raise serializers.ValidationError(problems[-1])
        if problems:
            raise serializers.ValidationError({index: [words] for index, words in problems.items()})
        return destinations

    def to_representation(self, value: Any) -> Any:
        return value


class StrictSerializer(JSONTypes, serializers.Serializer):
    """Refuses unknown fields, so a typo (`comand`) is an error instead of being silently ignored."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["the task document must be a JSON object"]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({key: ["unknown field"] for key in unknown})
        return super().to_internal_value(data)


class StrictItemSerializer(StrictSerializer):
    """An object inside the task document (one volume, one toleration)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["must be an object"]})
        return super().to_internal_value(data)


class ResourcesSerializer(StrictItemSerializer):
    """What the task asks of the cloud; a misspelt key (`cpus`) is refused like any unknown field."""

    cpu = serializers.FloatField(min_value=0.001, max_value=1024, required=False)
    memory_mb = serializers.IntegerField(min_value=1, max_value=16 * 1024 * 1024, required=False)
    gpu = serializers.IntegerField(min_value=0, max_value=64, required=False, default=0)


class VolumeSerializer(StrictItemSerializer):
    """A PersistentVolumeClaim mounted into the container (Kubernetes clouds only)."""

    claim = serializers.CharField(
        max_length=63,
        validators=[
            RegexValidator(DNS_LABEL.pattern, "must be a PersistentVolumeClaim name: lowercase letters, digits and '-'")
        ],
    )
    mount_path = serializers.CharField(max_length=1000, validators=[ABSOLUTE_PATH])
    read_only = serializers.BooleanField(required=False, default=False)


class TolerationSerializer(StrictItemSerializer):
    """A Kubernetes toleration, so the task may run on tainted nodes (Kubernetes clouds only)."""

    key = serializers.CharField(max_length=316, required=False, allow_blank=True, default="")
    operator = serializers.ChoiceField(choices=["Equal", "Exists"], required=False, default="Equal")
    value = serializers.CharField(max_length=63, required=False, allow_blank=True, default="")
    effect = serializers.ChoiceField(
        choices=["", "NoSchedule", "PreferNoSchedule", "NoExecute"], required=False, default=""
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["operator"] == "Exists" and attrs["value"]:
            raise serializers.ValidationError({"value": ["must be empty when operator is Exists"]})
        if attrs["operator"] == "Equal" and not attrs["key"]:
            raise serializers.ValidationError({"key": ["is required when operator is Equal"]})
        return attrs


class SecretRefSerializer(StrictItemSerializer):
    """A project secret the task receives: as an environment variable (`env`) or a file (`file`), one of the two.

    Only this reference is stored with the task; the value is delivered to the execution alone."""

    name = serializers.CharField(max_length=63)
    env = serializers.CharField(max_length=200, required=False, validators=[ENV_NAME_VALID])
    file = serializers.CharField(max_length=1000, required=False, validators=[FILE_PATH])

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("env" in attrs) == ("file" in attrs):
            raise serializers.ValidationError({"env": ["give either env (a variable name) or file (a path)"]})
        return attrs


MAX_OUTPUTS = 50


def relative_path_problem(value: str) -> str:
    """Why `value` is not a path inside the work directory ("" when it is): absolute, `..`, empty parts."""
    if value.startswith("/") or value.startswith("~"):
        return "must be relative to the work directory, e.g. out/result.csv, not an absolute path"
    parts = value.split("/")
    if any(part == ".." for part in parts):
        return "must stay inside the work directory: no '..' parts"
    if "\x00" in value or any(part in ("", ".") for part in parts):
        return "must be a relative path without empty or '.' parts, e.g. out/*.csv"
    return ""


class OutputSerializer(StrictItemSerializer):
    """A declared output: a path or glob in the work directory, collected when the program ends (docs/data.md)."""

    path = serializers.CharField(max_length=500, help_text="Relative to the work directory; `*`, `?`, `[..]` glob.")
    to = serializers.CharField(
        max_length=500, required=False, help_text="A destination prefix the matched files are stored under."
    )

    def validate_path(self, value: str) -> str:
        if problem := relative_path_problem(value):
            raise serializers.ValidationError(problem)
        return value

    def validate_to(self, value: str) -> str:
        if problem := relative_path_problem(value.rstrip("/")):
            raise serializers.ValidationError(problem.replace("the work directory", "the results"))
        return value.rstrip("/")


DATA_NAME = RegexValidator(r"^[A-Za-z][A-Za-z0-9_]{0,39}$", "must be a name of letters, digits and '_', e.g. inputs")


class DataRefSerializer(StrictItemSerializer):
    """A data reference (docs/data.md): one shape for every cloud; which kinds a cloud mounts is its backend's say."""

    kind = serializers.ChoiceField(choices=DATA_KINDS)
    ref = serializers.CharField(
        max_length=1000,
        required=False,
        help_text="What is referenced: a PVC's name (pvc), a volume's name or id (volume), an absolute host path "
        "(dir), a container/prefix (object); for scratch a name of your choice (default scratch-N).",
    )
    path = serializers.CharField(
        max_length=1000,
        required=False,
        help_text="Where the program sees it (an absolute mount path; required for pvc). `dir` is seen at its own "
        "host path: give `name` instead.",
    )
    mode = serializers.ChoiceField(
        choices=["ro", "rw"], required=False, help_text="Read-only (the default) or read-write (scratch: rw)."
    )
    name = serializers.CharField(
        max_length=40,
        required=False,
        validators=[DATA_NAME],
        help_text=f"Also given to the program as {ENV_PREFIX}<NAME> (upper case), besides {ENV_PREFIX}<N>.",
    )
    size_gb = serializers.IntegerField(min_value=1, max_value=16384, required=False, help_text="scratch only.")
    keep = serializers.BooleanField(required=False, help_text="scratch only: keep the volume after the attempt.")

    def validate_path(self, value: str) -> str:
        if not value.startswith("/") or "\x00" in value:
            raise serializers.ValidationError("must be an absolute path where the program sees it, e.g. /data")
        if ".." in value.split("/"):
            raise serializers.ValidationError("must not have '..' parts")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind, ref = attrs["kind"], attrs.get("ref", "")
        if kind != SCRATCH:
            for field in ("size_gb", "keep"):
                if field in attrs:
                    raise serializers.ValidationError({field: [f"only for scratch references, not {kind}"]})
            if not ref.strip():
                raise serializers.ValidationError({"ref": ["this field is required"]})
        elif "size_gb" not in attrs:
            raise serializers.ValidationError({"size_gb": ["a scratch reference needs its size, e.g. 10"]})
        if kind == PVC:
            if not DNS_LABEL.match(ref):
                message = "must be a PersistentVolumeClaim name: lowercase letters, digits and '-'"
                raise serializers.ValidationError({"ref": [message]})
            if "path" not in attrs:
                raise serializers.ValidationError({"path": ["a pvc reference needs `path`, where it is mounted"]})
        if kind == DIR:
            if not ref.startswith("/"):
                raise serializers.ValidationError({"ref": ["must be an absolute path on the host"]})
            if ".." in ref.split("/") or "\x00" in ref:
                raise serializers.ValidationError({"ref": ["must not have '..' parts"]})
        return attrs


class TaskSpecSerializer(StrictSerializer):
    cloud = serializers.SlugField(max_length=64)
    project = serializers.SlugField(max_length=64, required=False)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    command = StringListField(min_length=1, max_length=4096)
    image = serializers.CharField(max_length=500, required=False, allow_null=True, default=None)
    env = StringMapField(required=False, default=dict)
    workdir = serializers.CharField(
        max_length=1000, required=False, allow_null=True, default=None, validators=[ABSOLUTE_PATH]
    )
    resources = ResourcesSerializer(required=False)
    timeout_seconds = serializers.IntegerField(
        min_value=1, max_value=MAX_TIMEOUT_SECONDS, required=False, allow_null=True, default=None
    )
    retry_limit = serializers.IntegerField(min_value=0, max_value=20, required=False, default=0)
    # An execution the infrastructure interrupted (evicted, preempted, host lost): run it again or fail; the
    # defaults (requeue, at most DEFAULT_INTERRUPT_LIMIT times) apply where the document says nothing.
    on_interrupt = serializers.ChoiceField(choices=OnInterrupt.choices, required=False)
    interrupt_limit = serializers.IntegerField(min_value=0, max_value=MAX_INTERRUPT_LIMIT, required=False)
    # SIGTERM, then this long before SIGKILL when CloudPivot stops the program (cancel, timeout): time to checkpoint.
    stop_grace_seconds = serializers.IntegerField(min_value=0, max_value=MAX_STOP_GRACE_SECONDS, required=False)
    # Keep a failed attempt's pod or VM this long to get into it (clusters/debug_hold.py: the connection's limit).
    debug_hold_minutes = serializers.IntegerField(min_value=0, max_value=MAX_DEBUG_HOLD_MINUTES, required=False)
    labels = StringMapField(required=False, default=dict)
    # Kubernetes only (other clouds refuse them): PVC mounts, node selection, tolerations.
    volumes = VolumeSerializer(many=True, required=False, max_length=20)
    node_selector = StringMapField(required=False)
    tolerations = TolerationSerializer(many=True, required=False, max_length=20)
    # Project secrets by name (docs/security.md): delivered to the execution, never stored here.
    secrets = SecretRefSerializer(many=True, required=False, max_length=50)
    # Files the program leaves in its work directory, kept after it ends, whatever the outcome (docs/data.md).
    outputs = OutputSerializer(many=True, required=False, max_length=MAX_OUTPUTS)
    # Outbound network (docs/security.md#egress): within the connection's policy; its effective value is `egress`.
    network = NetworkField(required=False)
    # Data the task references (docs/data.md): mounted or named for the program, never copied by CloudPivot.
    data = DataRefSerializer(many=True, required=False, max_length=MAX_DATA)

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        bad = [key for key in value if not ENV_NAME.match(key)]
        if bad:
            raise serializers.ValidationError(f"not a valid environment variable name: {', '.join(bad)}")
        if len(value) > 500:
            raise serializers.ValidationError("at most 500 variables")
        return value

    def validate_volumes(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        paths = [volume["mount_path"] for volume in value]
        duplicates = sorted({path for path in paths if paths.count(path) > 1})
        if duplicates:
            raise serializers.ValidationError(f"mount_path used twice: {', '.join(duplicates)}")
        return [dict(volume) for volume in value]

    def validate_node_selector(self, value: dict[str, str]) -> dict[str, str]:
        bad = [f"{key}={item}" for key, item in value.items() if not (LABEL_KEY.match(key) and LABEL_VALUE.match(item))]
        if bad:
            raise serializers.ValidationError(f"not a valid node label: {', '.join(bad)}")
        return value

    def validate_tolerations(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [dict(toleration) for toleration in value]

    def validate_outputs(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [dict(output) for output in value]

    def validate_data(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        refs = [dict(ref) for ref in value]
        for index, ref in enumerate(refs):
            ref.setdefault("mode", "rw" if ref["kind"] == SCRATCH else "ro")
            if ref["kind"] == SCRATCH:
                ref.setdefault("ref", f"scratch-{index}")
                ref.setdefault("keep", False)
        for field in ("path", "name"):
            seen = [ref[field].upper() if field == "name" else ref[field] for ref in refs if ref.get(field)]
            duplicates = sorted({item for item in seen if seen.count(item) > 1})
            if duplicates:
                raise serializers.ValidationError(f"{field} used twice: {', '.join(duplicates)}")
        return refs

    def validate_secrets(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        targets = [ref.get("env") or ref.get("file") for ref in value]
        duplicates = sorted({target for target in targets if targets.count(target) > 1})
        if duplicates:
            raise serializers.ValidationError(f"delivered twice to: {', '.join(duplicates)}")
        return [dict(ref) for ref in value]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(
            {ref["env"] for ref in attrs.get("secrets") or [] if ref.get("env")} & set(attrs.get("env") or {})
        )
        if clash:
            raise serializers.ValidationError({"secrets": [f"also set in env: {', '.join(clash)}"]})
        if attrs.get("data") and any(key.startswith(ENV_PREFIX) for key in attrs.get("env") or {}):
            raise serializers.ValidationError({"env": [f"{ENV_PREFIX}* is where the program finds its `data`"]})
        return attrs


# Built TaskSpecSerializers, kept for the next document. A serializer's fields are deep copies of its declared
# ones (and its nested serializers' of theirs), made the first time it validates: about half of DRF's cost of
# checking a document, paid on every submit when a serializer was built per document. Validation stores nothing
# on the fields, only the document and its outcome on the serializer (initial_data, _validated_data, _errors,
# _data), which are removed before it is put back. A list used as a stack: pop() and append() are atomic under
# the GIL, so no two threads ever hold the same one; a thread that finds none builds its own.
_SPARE_SPEC_SERIALIZERS: list[TaskSpecSerializer] = []
_SPARE_MAX = 16
_VALIDATION_STATE = ("initial_data", "_validated_data", "_errors", "_data")


def spec_normalize(document: Any) -> dict[str, Any]:
    """Validate a submitted document and return it with defaults filled in; raise InvalidSpec naming each field."""
    try:
        serializer = _SPARE_SPEC_SERIALIZERS.pop()
        serializer.initial_data = document
    except IndexError:
        serializer = TaskSpecSerializer(data=document)
    try:
        valid = serializer.is_valid()
        errors = [] if valid else flatten_errors(serializer.errors)
        normalized = dict(serializer.validated_data) if valid else {}
    finally:
        for name in _VALIDATION_STATE:
            serializer.__dict__.pop(name, None)
        if len(_SPARE_SPEC_SERIALIZERS) < _SPARE_MAX:
            _SPARE_SPEC_SERIALIZERS.append(serializer)
    if not valid:
        first = errors[0]
        where = f"{first['field']}: " if first["field"] else ""
        raise InvalidSpec(f"invalid task document: {where}{first['message']}", errors=errors)
    normalized["resources"] = dict(normalized.get("resources") or {"gpu": 0})
    return normalized
