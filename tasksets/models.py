"""A task set and the link of each materialized element to its Task.

A set is one row however many elements it has: `count` or `items` say what the elements are, and
`materialized` how many of them (indexes 0 … materialized-1) exist as Tasks so far. Everything else about
progress is read from those Tasks (tasksets.selectors.taskset_counts), never copied onto the set.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from cloudpivot.accounts.models import Project
from cloudpivot.common import BaseModel
from clusters.models import CloudConnection
from tasks.models import Task
from tasksets.choices import TaskSetState


class TaskSet(BaseModel):
    """Many single tasks as one object. Only tasksets.services.lifecycle writes `state`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="task_sets")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="task_sets")
    connection = models.ForeignKey(CloudConnection, on_delete=models.PROTECT, related_name="task_sets")
    name = models.CharField(max_length=200, blank=True)
    template = models.JSONField(help_text="The task document every element is made from, as submitted.")
    count = models.PositiveIntegerField(null=True, blank=True, help_text="Elements 0 … count-1 (or `items`).")
    items = models.JSONField(null=True, blank=True, help_text="One parameter object per element (or `count`).")
    total = models.PositiveIntegerField(editable=False, help_text="How many elements: count, or len(items).")
    materialized = models.PositiveIntegerField(default=0, editable=False, help_text="Elements made Tasks so far.")
    max_running = models.PositiveIntegerField(null=True, blank=True, help_text="At most this many open at once.")
    request_sha256 = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=200, blank=True)

    state = models.CharField(max_length=16, choices=TaskSetState.choices, default=TaskSetState.ACTIVE, editable=False)
    state_reason = models.TextField(blank=True, editable=False)
    state_changed_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When every element made had ended and `set.finished` was announced (None while any is open).",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="%(app_label)s_%(class)s_unique_idempotency_key",
            ),
            models.CheckConstraint(
                condition=Q(count__isnull=False, items__isnull=True) | Q(count__isnull=True, items__isnull=False),
                name="%(app_label)s_%(class)s_count_or_items",
            ),
            models.CheckConstraint(
                condition=Q(materialized__lte=models.F("total")), name="%(app_label)s_%(class)s_materialized_le_total"
            ),
        ]
        indexes = [
            models.Index(fields=["state"], name="tasksets_set_state"),
            models.Index(fields=["project", "-created_at", "-id"], name="tasksets_set_project_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.short_id} {self.name}".strip()

    @property
    def short_id(self) -> str:
        return self.id.hex[:8]


class SetElement(models.Model):
    """Element `index` of a set, materialized as `task`. `retry_asked_by`: a retry of its failed task is asked
    for and waits for room (the set's max_running holds for retries too), with `retry_changes` if any."""

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="elements")
    index = models.PositiveIntegerField()
    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="set_element")
    retry_asked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    retry_changes = models.JSONField(
        null=True, blank=True, help_text="The asked retry's changes (dotted paths over the template), if any."
    )

    class Meta:
        ordering = ["task_set", "index"]
        constraints = [
            models.UniqueConstraint(fields=["task_set", "index"], name="%(app_label)s_%(class)s_unique_index"),
        ]

    def __str__(self) -> str:
        return f"{self.task_set.short_id}[{self.index}]"
