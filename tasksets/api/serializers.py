"""Task set API shapes: the request (documented; checked by tasksets.specs), the set with its progress, elements."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tasks.choices import TaskState
from tasks.specs import TaskSpecSerializer
from tasksets.models import SetElement, TaskSet
from tasksets.selectors import WAITING


class TaskSetCreateSerializer(serializers.Serializer):
    """A task set: one task document as the template, and either `count` or `items` (not both)."""

    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    template = TaskSpecSerializer(help_text="The task document of every element; `{{name}}` is substituted.")
    count = serializers.IntegerField(
        min_value=1,
        max_value=settings.TASK_SET_MAX_ELEMENTS,
        required=False,
        help_text="Elements 0 … count-1 (or items).",
    )
    items = serializers.ListField(
        child=serializers.DictField(child=serializers.JSONField()),
        required=False,
        min_length=1,
        max_length=settings.TASK_SET_MAX_ELEMENTS,
        help_text="One object of parameters per element (or count); each becomes the element's environment.",
    )
    max_running = serializers.IntegerField(
        min_value=1, required=False, allow_null=True, help_text="At most this many elements unfinished at once."
    )


class CountsSerializer(serializers.Serializer):
    """Elements by state: `waiting` (not yet a task) and each task state in lower case."""

    def get_fields(self) -> dict[str, serializers.Field]:
        names = [WAITING, *(state.lower() for state in TaskState.values)]
        return {name: serializers.IntegerField(read_only=True) for name in names}


class TaskSetSerializer(serializers.ModelSerializer):
    short_id = serializers.CharField(read_only=True)
    url = serializers.SerializerMethodField()
    cloud = serializers.CharField(source="connection.cloud_id", read_only=True)
    project = serializers.CharField(source="project.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    counts = serializers.SerializerMethodField()

    class Meta:
        model = TaskSet
        fields = [
            "id", "short_id", "url", "name", "state", "state_reason", "state_changed_at", "cloud", "project",
            "owner", "template", "count", "total", "materialized", "max_running", "counts", "created_at",
            "finished_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_url(self, task_set: TaskSet) -> str:
        path = f"/api/v1/task-sets/{task_set.pk}"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    @extend_schema_field(CountsSerializer)
    def get_counts(self, task_set: TaskSet) -> dict[str, int]:
        return self.context["counts"][task_set.pk]


class ElementSerializer(serializers.ModelSerializer):
    """One element made a task: its index and what a task list row shows of the task."""

    task_id = serializers.UUIDField(source="task.id", read_only=True)
    url = serializers.SerializerMethodField()
    name = serializers.CharField(source="task.name", read_only=True)
    state = serializers.ChoiceField(source="task.state", choices=TaskState.choices, read_only=True)
    state_reason = serializers.CharField(source="task.state_reason", read_only=True)
    attempts_count = serializers.IntegerField(source="task.attempts_count", read_only=True)
    exit_code = serializers.IntegerField(source="task.exit_code", read_only=True, allow_null=True)
    created_at = serializers.DateTimeField(source="task.created_at", read_only=True)
    finished_at = serializers.DateTimeField(source="task.finished_at", read_only=True, allow_null=True)

    class Meta:
        model = SetElement
        fields = [
            "index", "task_id", "url", "name", "state", "state_reason", "attempts_count", "exit_code", "created_at",
            "finished_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_url(self, element: SetElement) -> str:
        path = f"/api/v1/tasks/{element.task_id}"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class ElementPageSerializer(serializers.Serializer):
    elements = ElementSerializer(many=True)
    next_after_index = serializers.IntegerField(help_text="Give it as after_index for the next page.")
    has_more = serializers.BooleanField()


class ElementsQuerySerializer(serializers.Serializer):
    after_index = serializers.IntegerField(min_value=-1, required=False, default=-1)
    limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=100)
    state = serializers.ChoiceField(choices=TaskState.choices, required=False, allow_null=True, default=None)


class RetryFailedInputSerializer(serializers.Serializer):
    """The optional body of POST /task-sets/{id}/retry-failed."""

    changes = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text="A partial task document merged over the template for the failed elements' new attempts, e.g. "
        '{"resources": {"memory_mb": 4096}, "timeout_seconds": 600}; checked for every element first (400 names '
        "`changes.<field>`, nothing retried).",
    )


class RetryFailedSerializer(serializers.Serializer):
    retrying = serializers.IntegerField(help_text="Failed elements given a new attempt as the set has room.")
    set = TaskSetSerializer()
