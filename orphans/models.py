"""The stored orphan report: one row per (connection, kind, cloud id) the reconciler found out of step.

Only orphans.scan and orphans.actions write these rows. The table keeps its first name
(`resources_orphanfinding`): the model moved apps, the data did not.
"""

from __future__ import annotations

from django.db import models

from cloudpivot.common import BaseModel
from clusters.models import CloudConnection


class FindingCategory(models.TextChoices):
    ORPHAN = "orphan", "Orphan (tagged, unknown to CloudPivot)"
    STALE = "stale", "Stale (deleted/closed in CloudPivot, still in the cloud)"
    MISSING = "missing", "Missing (expected by CloudPivot, not in the cloud)"


class FindingState(models.TextChoices):
    OPEN = "open", "Open"
    DELETED = "deleted", "Deleted (asked the cloud)"
    ADOPTED = "adopted", "Adopted"
    NEEDS_CLEANUP = "needs_cleanup", "Needs cleanup (a delete failed)"
    RESOLVED = "resolved", "Resolved (no longer found)"


class OrphanFinding(BaseModel):
    connection = models.ForeignKey(CloudConnection, on_delete=models.CASCADE, related_name="orphan_findings")
    kind = models.CharField(max_length=16, help_text="server, image, volume, job, vm, vm_snapshot or data_volume")
    ref = models.CharField(max_length=255, help_text="The cloud's id (a Job: its name in the namespace).")
    uid = models.CharField(max_length=64, blank=True, help_text="Kubernetes uid (a delete precondition).")
    name = models.CharField(max_length=255, blank=True)
    category = models.CharField(max_length=16, choices=FindingCategory.choices)
    reason = models.TextField(blank=True)
    protected_reason = models.TextField(blank=True, help_text="Not empty: listed, never deleted.")
    evidence = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=FindingState.choices, default=FindingState.OPEN)
    error = models.TextField(blank=True, help_text="The last failed action's error (needs_cleanup).")
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    acted_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "resources_orphanfinding"
        ordering = ["-last_seen_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["connection", "kind", "ref"], name="resources_orphanfinding_unique_ref")
        ]

    def __str__(self) -> str:
        return f"{self.category} {self.kind} {self.name or self.ref}"

    @property
    def protected(self) -> bool:
        return bool(self.protected_reason)
