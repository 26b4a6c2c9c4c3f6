"""Shapes of the Runner protocol (docs/runner.md)."""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from cloudpivot.api import flatten_errors
from tasks.models import LogStream
from tasks.services.runner_reports import EVENT_TYPES

MAX_LOG_CHUNK_BYTES = 1024 * 1024
# Every value a Runner sends is checked here, so that what reaches the database is always storable:
# numbers within their columns, dates that parse, text PostgreSQL's jsonb takes (no NUL, no lone
# surrogate), bounded sizes. A refusal is a 400 naming the field (`events.0.data.exit_code`) and, for
# events, `rejected_seq`: the Runner then records it once and stops sending that event.
MAX_INT = 2**31 - 1  # the integer columns (acked seq, pid, exit code)
MAX_TEXT = 4000  # a reason or a progress message
MAX_EVENT_DATA_BYTES = 256 * 1024  # a result's summary (the Runner reads at most 64 KiB of result file)
MAX_USAGE_BYTES = 16 * 1024
MAX_JSON_DEPTH = 32
MAX_REFS = 100


def json_problem(value: Any, *, max_bytes: int) -> str:
    """Why this JSON value cannot be stored ("" when it can): its size, nesting, or text jsonb refuses."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"nested deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, dict):
            for key, child in item.items():
                if problem := text_problem(str(key)):
                    return f"a key {problem}"
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str) and (problem := text_problem(item)):
            return f"a text {problem}"
        elif isinstance(item, float) and not math.isfinite(item):
            return "a number is not finite"
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return f"is {size} bytes of JSON; at most {max_bytes}"
    return ""


def text_problem(text: str) -> str:
    """NUL characters and lone surrogates: valid in a JSON string, refused by PostgreSQL (and not text)."""
    if "\x00" in text:
        return "holds a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (not Unicode text)"
    return ""


class StorableJSONField(serializers.DictField):
    """A JSON object whose content the database can store, at most `max_bytes` of it."""

    def __init__(self, *, max_bytes: int, **kwargs: Any) -> None:
        self.max_bytes = max_bytes
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        if problem := json_problem(value, max_bytes=self.max_bytes):
            raise serializers.ValidationError(problem)
        return value


class HeartbeatInputSerializer(serializers.Serializer):
    boot_id = serializers.CharField(max_length=64, allow_blank=True, required=False, default="")
    pid = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0, max_value=MAX_INT)
    child = StorableJSONField(required=False, default=dict, max_bytes=MAX_USAGE_BYTES)
    usage = StorableJSONField(required=False, default=dict, max_bytes=MAX_USAGE_BYTES)


def optional_int(*, low: int, high: int) -> serializers.IntegerField:
    return serializers.IntegerField(required=False, allow_null=True, default=None, min_value=low, max_value=high)


def optional_text() -> serializers.CharField:
    return serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_TEXT)


class HostFactsSerializer(serializers.Serializer):
    """What the host agent says about its host when a program starts, for the provenance bundle (docs/data.md)."""

    agent_version = serializers.CharField(required=False, allow_blank=True, default="", max_length=32)
    kernel = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    cpu_model = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    boot_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)


class StartedDataSerializer(serializers.Serializer):
    pid = optional_int(low=0, high=MAX_INT)
    host = HostFactsSerializer(required=False, allow_null=True, default=None)


class ProgressDataSerializer(serializers.Serializer):
    message = optional_text()
    fraction = serializers.FloatField(required=False, allow_null=True, default=None, min_value=0, max_value=1)


class ResultDataSerializer(serializers.Serializer):
    summary = serializers.JSONField(required=False, allow_null=True, default=None)
    refs = serializers.ListField(
        child=serializers.CharField(max_length=2000), required=False, default=list, max_length=MAX_REFS
    )


class ExitedDataSerializer(serializers.Serializer):
    exit_code = optional_int(low=0, high=255)  # a process's exit status; a signal death is `signal`
    signal = optional_int(low=1, high=128)
    reason = optional_text()


class LostDataSerializer(serializers.Serializer):
    reason = optional_text()
    # The host rebooted under the program (a new boot id): the infrastructure ended it, not the program.
    interrupted = serializers.BooleanField(required=False, default=False)


def output_name(value: str) -> str:
    """A stored output's name: relative, inside the attempt's store location (the CLI writes it under a directory)."""
    if value.startswith("/") or any(part in ("", ".", "..") for part in value.split("/")):
        raise serializers.ValidationError("must be a relative name without empty, '.' or '..' parts")
    return value


class OutputFileSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=500, validators=[output_name])
    bytes = serializers.IntegerField(min_value=0, max_value=2**62)
    sha256 = serializers.RegexField(r"^[0-9a-f]{64}$", max_length=64)
    ref = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class OutputMissingSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=500)  # a declared pattern, or a name that could not be kept
    reason = optional_text()


class OutputsDataSerializer(serializers.Serializer):
    """The manifest of an attempt's declared outputs (docs/data.md): what was stored, what is missing and why."""

    files = OutputFileSerializer(many=True, required=False, default=list, max_length=1000)
    missing = OutputMissingSerializer(many=True, required=False, default=list, max_length=1000)
    complete = serializers.BooleanField(required=False, default=False)
    reason = optional_text()


EVENT_DATA = {
    "started": StartedDataSerializer,
    "progress": ProgressDataSerializer,
    "result": ResultDataSerializer,
    "exited": ExitedDataSerializer,
    "lost": LostDataSerializer,
    "outputs": OutputsDataSerializer,
}


class RunnerEventSerializer(serializers.Serializer):
    seq = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    type = serializers.ChoiceField(choices=sorted(EVENT_TYPES))
    time = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)
    data = StorableJSONField(required=False, default=dict, max_bytes=MAX_EVENT_DATA_BYTES)

    def validate_time(self, value: str) -> str:
        """An ISO 8601 time with its zone (as the Runner writes it), or nothing (then: when it arrived)."""
        if not value:
            return value
        try:
            when = parse_datetime(value)
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise serializers.ValidationError("must be an ISO 8601 time with a zone, e.g. 2026-11-30T13:00:00Z")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """The data of each event type has its own fields; unknown extra keys are kept (newer Runners)."""
        shape = EVENT_DATA[attrs["type"]](data=attrs["data"])
        if not shape.is_valid():
            raise serializers.ValidationError({"data": shape.errors})
        attrs["data"] = attrs["data"] | dict(shape.validated_data)
        return attrs


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
    pid = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0, max_value=MAX_INT)


def stand_in_event(seq: int, kind: Any, problems: list[dict[str, str]]) -> dict[str, Any]:
    """What is applied in place of an event the server cannot take (what the v1 Runner sends itself):
    the refusal in words, at the same seq; an `exited` or `lost` stays itself, without its data."""
    kind = kind if kind in EVENT_TYPES else "unknown"
    first = problems[0] if problems else {"field": "", "message": "invalid"}
    note = f"the server refused the {kind} event: {first['field']}: {first['message']}"[:MAX_TEXT]
    if kind == "exited":
        return {"seq": seq, "type": "exited", "time": "", "data": {"exit_code": None, "signal": None, "reason": note}}
    if kind == "lost":
        return {"seq": seq, "type": "lost", "time": "", "data": {"reason": note}}
    if kind == "outputs":  # the outputs are then recorded as incomplete, saying why
        data = {"files": [], "missing": [], "complete": False, "reason": note}
        return {"seq": seq, "type": "outputs", "time": "", "data": data}
    return {"seq": seq, "type": "progress", "time": "", "data": {"message": note, "fraction": None}}


class SyncEventsField(serializers.ListField):
    """v2 events: one the server cannot take becomes its stand-in instead of refusing the request.

    A host agent reports every attempt of its host in one request and retries a refused one as it is,
    so a 400 for one program's bad result would stop the reports of all of them for ever. Only an event
    without a usable seq refuses the batch (an honest agent never sends one).
    """

    child = serializers.DictField()

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if isinstance(data, list) and all(type(item) is dict for item in data):
            raw = data  # what ListField(child=DictField) would give, without a field run per item
        else:
            raw = super().to_internal_value(data)
        if len(raw) > 1000:
            raise serializers.ValidationError("at most 1000 events per batch")
        events = []
        for index, item in enumerate(raw):
            if plain := plain_progress(item):
                events.append(plain)
                continue
            event = RunnerEventSerializer(data=item)
            if event.is_valid():
                events.append(dict(event.validated_data))
                continue
            seq = item.get("seq")
            if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= MAX_INT:
                raise serializers.ValidationError({index: event.errors})
            events.append(stand_in_event(seq, item.get("type"), flatten_errors(event.errors)))
        return events


PLAIN_PROGRESS_KEYS = {"message", "fraction"}


def plain_progress(item: dict[str, Any]) -> dict[str, Any] | None:
    """A progress event exactly as RunnerEventSerializer would take it, checked in plain Python; None for
    anything else (another type, a time, another data key, a value near a limit…): the serializer then decides.

    Most of a busy agent's events are these, and a DRF field run per value costs ~0.5 ms an event (issue 11).
    """
    seq, data, when = item.get("seq"), item.get("data", {}), item.get("time", "")
    if item.get("type") != "progress" or type(seq) is not int or not 1 <= seq <= MAX_INT or when != "":
        return None
    if type(data) is not dict or not data.keys() <= PLAIN_PROGRESS_KEYS:
        return None
    message, fraction = data.get("message", ""), data.get("fraction")
    if type(message) is not str or len(message) > MAX_TEXT or text_problem(message):
        return None
    if fraction is not None and (type(fraction) not in (int, float) or not 0 <= fraction <= 1):
        return None  # (NaN fails the comparison too)
    return {
        "seq": seq,
        "type": "progress",
        "time": "",
        "data": {"message": message.strip(), "fraction": None if fraction is None else float(fraction)},
    }


LOG_PIECE_KEYS = {"stream", "offset", "data"}
LOG_STREAMS = frozenset(LogStream.values)


def plain_log_piece(item: Any) -> dict[str, Any] | None:
    """A log piece exactly as LogsInputSerializer would take it, checked in plain Python; None for anything else
    (a missing or extra key, an offset that is not a plain int, data that is not base64…): the serializer then
    decides. A streaming agent sends one or two pieces per attempt in every sync: a DRF field run per value was
    a tenth of a sync's CPU (issue 11)."""
    if type(item) is not dict or item.keys() != LOG_PIECE_KEYS:
        return None
    stream, offset, data = item["stream"], item["offset"], item["data"]
    if stream not in LOG_STREAMS or type(offset) is not int or offset < 0 or type(data) is not str:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) > MAX_LOG_CHUNK_BYTES:
        return None
    return {"stream": stream, "offset": offset, "data": raw}


class SyncLogsField(serializers.ListField):
    """v2 log pieces: each one checked by plain_log_piece, or by LogsInputSerializer when that says None."""

    child = serializers.DictField()

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if isinstance(data, list):
            pieces = [plain_log_piece(item) for item in data]
            if None not in pieces:
                return pieces
        return [dict(piece) for piece in LogsInputSerializer(many=True).run_validation(data)]


class SyncAttemptSerializer(serializers.Serializer):
    attempt = serializers.CharField(max_length=63)
    events = SyncEventsField(required=False, default=list)
    logs = SyncLogsField(required=False, default=list)
    usage = StorableJSONField(required=False, default=dict, max_bytes=MAX_USAGE_BYTES)


class SyncInputSerializer(serializers.Serializer):
    protocol = serializers.ChoiceField(choices=[2])
    # Without "agent", the same defaults as an empty one (not a bare {}: the view reads agent["name"]).
    agent = SyncAgentSerializer(required=False, default=lambda: {"name": "", "boot_id": "", "version": "", "pid": None})
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
