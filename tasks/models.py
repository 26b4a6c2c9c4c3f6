"""Tasks, their Attempts, the public event history and the stored log."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from cloudpivot.accounts.models import Project
from cloudpivot.common import BaseModel
from clusters.models import CloudConnection
from tasks.choices import TERMINAL, AttemptState, CleanupState, StopReason, TaskState


class Task(BaseModel):
    """One batch task bound at submission to one connection. Only tasks.services.lifecycle writes `state`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by the composite indexes below (project/owner, newest first), which serve lists in order.
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="tasks", db_index=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="tasks", db_index=False)
    connection = models.ForeignKey(CloudConnection, on_delete=models.PROTECT, related_name="tasks")
    # Copied at submission: later edits to the connection do not change existing tasks.
    backend = models.CharField(max_length=16, editable=False)
    name = models.CharField(max_length=200, blank=True)
    spec = models.JSONField(help_text="The document as submitted.")
    spec_sha256 = models.CharField(max_length=64)
    normalized = models.JSONField(help_text="The spec with defaults filled in: what actually runs.")
    idempotency_key = models.CharField(max_length=200, blank=True)

    state = models.CharField(max_length=16, choices=TaskState.choices, default=TaskState.PENDING, editable=False)
    state_reason = models.TextField(blank=True, editable=False)
    state_changed_at = models.DateTimeField(auto_now_add=True)
    last_event_seq = models.PositiveIntegerField(default=0, editable=False)

    retry_limit = models.PositiveSmallIntegerField(default=0)
    timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    attempts_count = models.PositiveSmallIntegerField(default=0, editable=False)
    failed_attempts = models.PositiveSmallIntegerField(default=0, editable=False)
    # Executions lost to the infrastructure (attempts ended `interrupted`): they do not count against retry_limit.
    interruptions = models.PositiveSmallIntegerField(default=0, editable=False)
    started_at = models.DateTimeField(null=True, blank=True, help_text="First start; the timeout counts from here.")
    finished_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True, help_text="When a RETRY_WAIT task is due.")
    exit_code = models.IntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="%(app_label)s_%(class)s_unique_idempotency_key",
            )
        ]
        indexes = [
            models.Index(fields=["state", "created_at"], name="tasks_task_state_created"),
            # Admission: the projects with PENDING tasks on a connection, and each one's oldest (services/admission.py).
            models.Index(fields=["connection", "state", "project", "created_at", "id"], name="tasks_task_admission"),
            # Fair share (admission.queue_heads): the (project, owner) pairs with PENDING tasks on a connection, read
            # from the index alone, and each pair's oldest, in order. Only PENDING rows: small, whatever the history.
            models.Index(
                fields=["connection", "project", "owner", "created_at", "id"],
                condition=Q(state="PENDING"),
                name="tasks_task_pending_heads",
            ),
            models.Index(fields=["project", "-created_at", "-id"], name="tasks_task_project_newest"),
            # Lists filtered by state within a project, newest first (a rare state would walk the whole project).
            models.Index(fields=["project", "state", "-created_at", "-id"], name="tasks_task_project_state"),
            models.Index(fields=["owner", "-created_at", "-id"], name="tasks_task_owner_newest"),
            models.Index(fields=["-created_at", "-id"], name="tasks_task_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.short_id} {self.name or ''}".strip()

    @property
    def short_id(self) -> str:
        return self.id.hex[:8]

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL


class Attempt(BaseModel):
    """One execution of a task. Its external name is committed before any cloud is asked to create anything."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    external_name = models.CharField(max_length=63, unique=True)
    external_ref = models.CharField(max_length=500, blank=True)
    state = models.CharField(max_length=16, choices=AttemptState.choices, default=AttemptState.CREATED)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_signal = models.IntegerField(null=True, blank=True)
    failure_reason = models.TextField(blank=True)

    # Runner: credential (hash only), identity, liveness and the internal event counter.
    credential_nonce = models.CharField(max_length=32, editable=False)
    runner_token_hash = models.CharField(max_length=64, unique=True, editable=False)
    runner_boot_id = models.CharField(max_length=64, blank=True)
    runner_pid = models.IntegerField(null=True, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    acked_seq = models.PositiveIntegerField(default=0)
    closed_at = models.DateTimeField(null=True, blank=True, help_text="No more Runner reports are accepted.")
    usage = models.JSONField(default=dict, blank=True)

    stop_requested_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=16, choices=StopReason.choices, blank=True)
    stop_escalated_at = models.DateTimeField(null=True, blank=True)
    start_error = models.TextField(blank=True)

    cleanup_state = models.CharField(max_length=16, choices=CleanupState.choices, default=CleanupState.NOT_NEEDED)
    cleanup_error = models.TextField(blank=True)

    # Debug hold (tasks/services/debug_hold.py): a failed attempt's pod or VM is kept until `hold_until`, then
    # cleaned up; a release sets it to the release time. In the database, so a restart loses no hold.
    hold_until = models.DateTimeField(null=True, blank=True, help_text="Cleanup waits until then (debug hold).")
    hold_released_at = models.DateTimeField(null=True, blank=True)
    hold_released_by = models.CharField(max_length=150, blank=True)
    hold_access = models.JSONField(default=dict, blank=True, help_text="What the page needs to say how to get in.")

    # Where start-up time went: one timestamp per phase.
    admitted_at = models.DateTimeField(null=True, blank=True)
    cloud_created_at = models.DateTimeField(null=True, blank=True)
    # Pod scheduled on a node (Kubernetes) or server ACTIVE (OpenStack), from the cloud's observation.
    booted_at = models.DateTimeField(null=True, blank=True)
    runner_contact_at = models.DateTimeField(null=True, blank=True)
    program_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    log_bytes = models.PositiveBigIntegerField(default=0, help_text="Bytes stored, all streams.")
    log_stdout_bytes = models.PositiveBigIntegerField(default=0)
    log_stderr_bytes = models.PositiveBigIntegerField(default=0)
    log_dropped_bytes = models.PositiveBigIntegerField(default=0, help_text="Bytes over the task's log cap.")
    observed_phase = models.CharField(max_length=16, blank=True, help_text="The cloud's last word on the execution.")
    observed_reason = models.TextField(blank=True)
    log_cursor = models.JSONField(default=dict, blank=True, help_text="Where copying logs from the cloud stands.")

    class Meta:
        ordering = ["task_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["task", "number"], name="%(app_label)s_%(class)s_unique_number"),
        ]
        indexes = [
            models.Index(
                fields=["cleanup_state"], name="tasks_attempt_cleanup", condition=Q(cleanup_state=CleanupState.PENDING)
            ),
            # The cloud page's phase percentiles read the attempts admitted in the last day (tasks/phases.py).
            models.Index(fields=["-admitted_at"], name="tasks_attempt_admitted"),
            # Admission counts held attempts against quota on every pass (tasks/selectors.py): few rows, partial.
            models.Index(fields=["hold_until"], name="tasks_attempt_held", condition=Q(hold_until__isnull=False)),
            # The agent's assignments and reconcile's starts read open attempts, a few rows among every attempt ever.
            models.Index(fields=["task"], name="tasks_attempt_open", condition=Q(closed_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return self.external_name

    @property
    def is_closed(self) -> bool:
        return self.closed_at is not None


class TaskEvent(models.Model):
    """The public, ordered history of a task: seq 1, 2, 3 … per task."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["task", "seq"], name="%(app_label)s_%(class)s_unique_seq")]
        # The per-minute metrics pass reads the last minute's state events (clusters/metrics/figures.py).
        indexes = [models.Index(fields=["type", "created_at"], name="tasks_event_type_time")]

    def __str__(self) -> str:
        return f"{self.task_id}#{self.seq} {self.type}"


class LogStream(models.TextChoices):
    STDOUT = "stdout", "stdout"
    STDERR = "stderr", "stderr"


class LogChunk(models.Model):
    """Log bytes of one attempt and stream. `offset` counts within the stream, `position` across both streams."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="log_chunks")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="log_chunks")
    stream = models.CharField(max_length=8, choices=LogStream.choices)
    offset = models.PositiveBigIntegerField()
    position = models.PositiveBigIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["attempt_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["attempt", "stream", "offset"], name="%(app_label)s_%(class)s_unique_offset"
            ),
            models.UniqueConstraint(fields=["attempt", "position"], name="%(app_label)s_%(class)s_unique_position"),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id} {self.stream}@{self.offset}"


class Lease(models.Model):
    """A named, expiring claim, so that among many workers only one runs the ticker at a time."""

    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=128)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder} until {self.expires_at}"
