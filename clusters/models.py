"""Cloud connections: where tasks run."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from cloudpivot import credentials
from cloudpivot.accounts.models import Project
from cloudpivot.common import BaseModel
from clusters.choices import RAW, BackendKind, HealthStatus, SubjectKind


class CloudConnection(BaseModel):
    """One cloud target (`local`, `k3s-lab`, `os-prod`). Credentials are referenced, never stored here."""

    cloud_id = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, blank=True)
    backend = models.CharField(max_length=16, choices=BackendKind.choices)
    endpoint = models.CharField(max_length=500, blank=True)
    scope = models.CharField(max_length=200, blank=True, help_text="Kubernetes namespace or OpenStack project.")
    credentials_ref = models.CharField(
        max_length=500,
        blank=True,
        help_text="Where the credentials live: a file path, or env:NAME for an environment variable.",
    )  # only files under settings.CREDENTIALS_DIR, only variables CLOUDPIVOT_CLOUD_* (cloudpivot/credentials.py)
    options = models.JSONField(default=dict, blank=True, help_text="Backend-specific settings and defaults.")
    dispatch_enabled = models.BooleanField(default=True, help_text="Off: new tasks wait; running ones go on.")
    max_active_tasks = models.PositiveIntegerField(
        default=0, help_text="At most this many tasks active on this connection at once (0 = no limit)."
    )
    projects = models.ManyToManyField(
        Project, blank=True, related_name="connections", help_text="Projects whose members may use this connection."
    )
    runs_on_host = models.BooleanField(
        default=False,
        help_text="Tasks run their programs on the CloudPivot host itself (always so for `local`): a project granted "
        "this connection can read what the program's user can read. Only superusers may grant or change it.",
    )
    facts = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="What CloudPivot read from the cloud (e.g. flavor sizes); emptied when the connection is saved.",
    )
    health_status = models.CharField(max_length=16, choices=HealthStatus.choices, default=HealthStatus.UNKNOWN)
    health_message = models.TextField(blank=True)
    health_checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cloud_id"]

    def __str__(self) -> str:
        return self.cloud_id

    def clean(self) -> None:
        """Credentials and CA files only from the allowlisted places: anything else is a field error."""
        super().clean()
        try:
            credentials.check_connection_sources(credentials_ref=self.credentials_ref, options=self.options)
        except credentials.CredentialsNotAllowed as exc:
            if exc.field.startswith("options."):
                raise ValidationError({"options": f"{exc.field}: {exc.message}"}) from None
            raise ValidationError({exc.field: exc.message}) from None

    def save(self, *args, **kwargs) -> None:
        """`local` always runs on the host, whatever the form said; a changed connection forgets its cached facts."""
        if self.backend == BackendKind.LOCAL:
            self.runs_on_host = True
        if not kwargs.get("update_fields"):
            self.facts = {}
        super().save(*args, **kwargs)


class MetricSample(models.Model):
    """One figure at one moment: raw (resolution 0) or the average over a bucket of `resolution` seconds.

    Generic on purpose: a subject is a kind and a key (node name, instance id, project slug), so new
    subjects (VM instances) need no schema change. `connection` is empty for platform-wide figures.
    """

    connection = models.ForeignKey(
        CloudConnection, null=True, blank=True, on_delete=models.CASCADE, related_name="metric_samples"
    )
    subject_kind = models.CharField(max_length=16, choices=SubjectKind.choices)
    subject_key = models.CharField(max_length=200, blank=True)
    metric = models.CharField(max_length=64)
    value = models.FloatField()
    resolution = models.PositiveIntegerField(default=RAW, help_text="0 = raw; otherwise the bucket size in seconds.")
    timestamp = models.DateTimeField(help_text="When sampled; for a bucket, its start.")

    class Meta:
        ordering = ["timestamp"]
        indexes = [
            # One series (subject and metric) over a time range, at one resolution.
            models.Index(
                fields=["connection", "subject_kind", "subject_key", "metric", "resolution", "timestamp"],
                name="clusters_sample_series",
            ),
            # Downsampling and retention walk one resolution by time.
            models.Index(fields=["resolution", "timestamp"], name="clusters_sample_age"),
        ]

    def __str__(self) -> str:
        return f"{self.subject_kind}:{self.subject_key} {self.metric}={self.value} @{self.timestamp}"
