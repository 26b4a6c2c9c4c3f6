"""Output shapes of the tasks API. Input goes through tasks.specs."""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.egress import MAX_DESTINATIONS, NONE, OPEN, task_egress
from results.choices import StorageRole, StorageState
from tasks.choices import StopReason
from tasks.models import Attempt, Task, TaskEvent
from tasks.phases import MARKS
from tasks.selectors import task_queue_position
from tasks.services.suggestions import FAILURE_CLASSES

EGRESS_SCHEMA = {
    "oneOf": [
        {"type": "string", "enum": [NONE, OPEN]},
        {"type": "array", "maxItems": MAX_DESTINATIONS, "items": {"type": "string"}},
    ]
}


class PhaseSerializer(serializers.Serializer):
    """One phase of an attempt's start-up and run (tasks/phases.py): from `at` for `seconds`."""

    phase = serializers.ChoiceField(choices=[key for key, _label, _field in MARKS])
    label = serializers.CharField()
    at = serializers.DateTimeField()
    seconds = serializers.FloatField(help_text="Until the next phase began (until now while it lasts).")
    percent = serializers.FloatField(help_text="Share of the attempt's whole time, for a timeline bar.")
    offset = serializers.FloatField(help_text="Sum of the percents of the phases before it.")


class SuggestionSerializer(serializers.Serializer):
    """What to retry a failed attempt with (tasks/services/suggestions.py)."""

    failure_class = serializers.ChoiceField(choices=list(FAILURE_CLASSES))
    field = serializers.CharField(
        allow_null=True, help_text="Dotted spec field to change; null when no spec change helps (read `why`)."
    )
    current = serializers.JSONField(allow_null=True)
    suggested = serializers.JSONField(allow_null=True, help_text="Pass as changes: {field: suggested} to retry.")
    why = serializers.CharField()


class HowToGetInSerializer(serializers.Serializer):
    """How to get into a held attempt's pod or VM (clusters/debug_hold.py)."""

    kind = serializers.ChoiceField(choices=["kubectl_exec", "openstack_console"])
    command = serializers.CharField(help_text="The command to run, e.g. kubectl exec -n tasks -it <pod> -c debug -- sh")
    words = serializers.CharField()
    namespace = serializers.CharField(required=False, help_text="Kubernetes only.")
    pod = serializers.CharField(required=False, help_text="Kubernetes only; empty when the pod was never seen.")
    server_id = serializers.CharField(required=False, help_text="OpenStack only.")


class DebugHoldSerializer(serializers.Serializer):
    """A failed attempt kept for debugging (the task's debug_hold_minutes), then cleaned up."""

    until = serializers.DateTimeField(help_text="When it is cleaned up (the release time, if released).")
    active = serializers.BooleanField(help_text="Still kept: not released, not expired, not yet cleaned up.")
    released_at = serializers.DateTimeField(allow_null=True)
    released_by = serializers.CharField(allow_blank=True)
    how_to_get_in = HowToGetInSerializer(allow_null=True, help_text="While active; null after.")


class ReleaseHoldSerializer(serializers.Serializer):
    """The answer of POST /tasks/{id}/release-hold."""

    released = serializers.ListField(child=serializers.IntegerField(), help_text="The attempts released.")
    message = serializers.CharField()


class StorageReferenceSerializer(serializers.Serializer):
    """One data reference the attempt used (docs/data.md): created for it or borrowed, and what became of it."""

    index = serializers.IntegerField(help_text="Its place in the task's `data`: the program's CLOUDPIVOT_DATA_<index>.")
    kind = serializers.CharField()
    ref = serializers.CharField(help_text="Its identity: a claim's name, a volume, a host directory (resolved).")
    name = serializers.CharField()
    path = serializers.CharField()
    mode = serializers.ChoiceField(choices=["ro", "rw"])
    role = serializers.ChoiceField(choices=StorageRole.choices)
    state = serializers.ChoiceField(choices=StorageState.choices)
    created_at = serializers.DateTimeField()
    released_at = serializers.DateTimeField(allow_null=True)


class AttemptSerializer(serializers.ModelSerializer):
    """One execution of a task, with its phases, failure class and retry suggestion."""

    stop_reason = serializers.ChoiceField(
        choices=StopReason.choices, allow_blank=True, read_only=True, help_text="Empty while nobody asked to stop."
    )
    failure_class = serializers.CharField(read_only=True, help_text="Empty for an attempt that did not fail.")
    phases = PhaseSerializer(many=True, read_only=True)
    suggestion = SuggestionSerializer(read_only=True, allow_null=True)
    debug_hold = DebugHoldSerializer(read_only=True, allow_null=True)
    storage = StorageReferenceSerializer(many=True, read_only=True, help_text="The data references it used.")

    class Meta:
        model = Attempt
        fields = [
            "number",
            "external_name",
            "external_ref",
            "state",
            "exit_code",
            "exit_signal",
            "failure_reason",
            "stop_reason",
            "stop_requested_at",
            "cleanup_state",
            "runner_boot_id",
            "last_heartbeat_at",
            "admitted_at",
            "cloud_created_at",
            "booted_at",
            "runner_contact_at",
            "program_started_at",
            "finished_at",
            "log_bytes",
            "log_dropped_bytes",
            "usage",
            "failure_class",
            "phases",
            "suggestion",
            "debug_hold",
            "storage",
        ]
        read_only_fields = fields


def queue_place(task: Task) -> int | None:
    if hasattr(task, "queue_position_value"):  # a list computes it in its one query (selectors.tasks_for_list)
        return task.queue_position_value
    return task_queue_position(task=task)


class TaskSerializer(serializers.ModelSerializer):
    short_id = serializers.CharField(read_only=True)
    cloud = serializers.CharField(source="connection.cloud_id", read_only=True)
    project = serializers.CharField(source="project.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    spec = serializers.JSONField(source="normalized", read_only=True)
    egress = serializers.SerializerMethodField(
        help_text='What the program may reach outside: "none", "open" (not restricted by CloudPivot) or the '
        "destinations it may reach: the task's `network` within its connection's policy (docs/security.md#egress)."
    )
    url = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField(help_text="Place in the cloud's queue while PENDING.")

    class Meta:
        model = Task
        fields = [
            "id",
            "short_id",
            "url",
            "name",
            "state",
            "state_reason",
            "state_changed_at",
            "cloud",
            "backend",
            "project",
            "owner",
            "spec",
            "egress",
            "spec_sha256",
            "retry_limit",
            "timeout_seconds",
            "attempts_count",
            "failed_attempts",
            "exit_code",
            "result",
            "next_attempt_at",
            "created_at",
            "started_at",
            "finished_at",
            "last_event_seq",
            "queue_position",
        ]
        read_only_fields = fields

    @extend_schema_field(EGRESS_SCHEMA)
    def get_egress(self, task: Task) -> Any:
        return task_egress(task.normalized)

    def get_queue_position(self, task: Task) -> int | None:
        return queue_place(task)

    def get_url(self, task: Task) -> str:
        request = self.context.get("request")
        path = f"/api/v1/tasks/{task.pk}"
        return request.build_absolute_uri(path) if request else path


# The same text DRF's DateTimeField gives (ISO 8601, UTC as "Z"); one instance, built once.
_DATETIME = serializers.DateTimeField()
_TASK_DATETIMES = ("state_changed_at", "next_attempt_at", "created_at", "started_at", "finished_at")


def task_representation(task: Task, request=None) -> dict:
    """What TaskSerializer(task).data gives, key for key, written out by hand for one task.

    A submit and a read answer one task each; building a ModelSerializer (25 fields, each a Field
    object with its own copy) cost more CPU than the rest of the read. The shape stays TaskSerializer's
    (the OpenAPI schema is generated from it; tests/tasks/test_api_read.py compares the two).
    """
    dt = _DATETIME.to_representation
    path = f"/api/v1/tasks/{task.pk}"
    data = {
        "id": str(task.id),
        "short_id": task.short_id,
        "url": request.build_absolute_uri(path) if request is not None else path,
        "name": task.name,
        "state": task.state,
        "state_reason": task.state_reason,
        "state_changed_at": None,
        "cloud": task.connection.cloud_id,
        "backend": task.backend,
        "project": task.project.slug,
        "owner": task.owner.username,
        "spec": task.normalized,
        "egress": task_egress(task.normalized),
        "spec_sha256": task.spec_sha256,
        "retry_limit": task.retry_limit,
        "timeout_seconds": task.timeout_seconds,
        "attempts_count": task.attempts_count,
        "failed_attempts": task.failed_attempts,
        "exit_code": task.exit_code,
        "result": task.result,
        "next_attempt_at": None,
        "created_at": None,
        "started_at": None,
        "finished_at": None,
        "last_event_seq": task.last_event_seq,
        "queue_position": queue_place(task),
    }
    for name in _TASK_DATETIMES:
        data[name] = dt(getattr(task, name))
    return data


class TaskEventSerializer(serializers.ModelSerializer):
    time = serializers.DateTimeField(source="created_at", read_only=True)

    class Meta:
        model = TaskEvent
        fields = ["seq", "type", "message", "data", "time"]
        read_only_fields = fields


class TaskEventPageSerializer(serializers.Serializer):
    """A page of a task's events (documents GET /tasks/{id}/events)."""

    events = TaskEventSerializer(many=True)
    next_after_seq = serializers.IntegerField(help_text="Pass back as after_seq for what is new.")
    has_more = serializers.BooleanField()


class TaskLogSerializer(serializers.Serializer):
    """Log text from a byte offset (documents GET /tasks/{id}/logs)."""

    attempt = serializers.IntegerField(allow_null=True, help_text="Null while the task has no attempt yet.")
    stream = serializers.CharField(allow_null=True, help_text="stdout, stderr, or all (both in arrival order).")
    offset = serializers.IntegerField()
    next_offset = serializers.IntegerField(help_text="Pass back as offset to continue.")
    data = serializers.CharField(allow_blank=True, help_text="UTF-8 text (undecodable bytes replaced).")
    complete = serializers.BooleanField(help_text="The attempt is closed and everything was read.")


class TaskAttemptsSerializer(serializers.Serializer):
    """Every execution of a task (documents GET /tasks/{id}/attempts)."""

    attempts = AttemptSerializer(many=True)
    suggestion = SuggestionSerializer(
        allow_null=True, help_text="The latest attempt's suggestion while the task may be retried, else null."
    )


class AttemptSideSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    external_name = serializers.CharField()
    state = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    exit_signal = serializers.IntegerField(allow_null=True)
    failure_class = serializers.CharField()
    failure_reason = serializers.CharField(allow_blank=True)
    phases = PhaseSerializer(many=True)
    last_log_lines = serializers.ListField(child=serializers.CharField(allow_blank=True))
    spec = serializers.JSONField(help_text="The spec this attempt ran.")
    suggestion = SuggestionSerializer(allow_null=True)


class SpecDifferenceSerializer(serializers.Serializer):
    field = serializers.CharField()
    a = serializers.JSONField(allow_null=True)
    b = serializers.JSONField(allow_null=True)


class AttemptCompareSerializer(serializers.Serializer):
    """Two attempts side by side (documents GET /tasks/{id}/attempts/compare)."""

    a = AttemptSideSerializer()
    b = AttemptSideSerializer()
    spec_differences = SpecDifferenceSerializer(many=True)


class RetryInputSerializer(serializers.Serializer):
    """The optional body of POST /tasks/{id}/retry."""

    changes = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text='Spec fields to change for the new attempt, by dotted path, e.g. {"resources.memory_mb": 512}; '
        "checked as a submission is (400 names the field).",
    )


def _datetime(value: datetime | None, zone: tzinfo) -> str | None:
    """DRF's DateTimeField output (ISO 8601 in the current time zone, `Z` for UTC), without a field object; the
    zone is looked up once per page (a lookup per value was a tenth of a list request's CPU)."""
    if not value:
        return None
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class TaskListSerializer(serializers.BaseSerializer):
    """A list row in exactly TaskSerializer's shape (and documented as it), written out by hand from the dict
    `selectors.tasks_for_list` reads: DRF's per-field serialization of 50 model instances cost more CPU than
    the rest of the request. Context: `queue_positions` (the page's places, selectors.queue_positions),
    `url_prefix`, `timezone` (the current one). tests/tasks/test_api_list_rows.py holds each row to what
    GET /tasks/{id} (TaskSerializer) answers."""

    def to_representation(self, row: dict[str, Any]) -> dict[str, Any]:
        task_id, zone = str(row["id"]), self.context["timezone"]
        return {
            "id": task_id,
            "short_id": row["id"].hex[:8],
            "url": self.context["url_prefix"] + task_id,
            "name": row["name"],
            "state": row["state"],
            "state_reason": row["state_reason"],
            "state_changed_at": _datetime(row["state_changed_at"], zone),
            "cloud": row["connection__cloud_id"],
            "backend": row["backend"],
            "project": row["project__slug"],
            "owner": row["owner__username"],
            "spec": row["normalized"],
            "egress": task_egress(row["normalized"]),
            "spec_sha256": row["spec_sha256"],
            "retry_limit": row["retry_limit"],
            "timeout_seconds": row["timeout_seconds"],
            "attempts_count": row["attempts_count"],
            "failed_attempts": row["failed_attempts"],
            "exit_code": row["exit_code"],
            "result": row["result"],
            "next_attempt_at": _datetime(row["next_attempt_at"], zone),
            "created_at": _datetime(row["created_at"], zone),
            "started_at": _datetime(row["started_at"], zone),
            "finished_at": _datetime(row["finished_at"], zone),
            "last_event_seq": row["last_event_seq"],
            "queue_position": self.context["queue_positions"].get(row["id"]),
        }
