"""Cloud connections: where tasks run."""

from __future__ import annotations

from django.db import models

from cloudpivot.accounts.models import Project
from cloudpivot.common import BaseModel
from clusters.choices import BackendKind, HealthStatus


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
    )
    options = models.JSONField(default=dict, blank=True, help_text="Backend-specific settings and defaults.")
    dispatch_enabled = models.BooleanField(default=True, help_text="Off: new tasks wait; running ones go on.")
    max_active_tasks = models.PositiveIntegerField(
        default=0, help_text="At most this many tasks active on this connection at once (0 = no limit)."
    )
    projects = models.ManyToManyField(
        Project, blank=True, related_name="connections", help_text="Projects whose members may use this connection."
    )
    health_status = models.CharField(max_length=16, choices=HealthStatus.choices, default=HealthStatus.UNKNOWN)
    health_message = models.TextField(blank=True)
    health_checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cloud_id"]

    def __str__(self) -> str:
        return self.cloud_id
