"""What an attempt left behind: its manifest and one row per output file (docs/data.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from cloudpivot.accounts.models import Project
from cloudpivot.common import BaseModel
from clusters.models import CloudConnection
from results.choices import ManifestState, OutputState, StorageRole, StorageState, StoreKind
from tasks.models import Attempt


class OutputManifest(BaseModel):
    """The manifest an attempt's Runner (or host agent) reported: complete or not, and why."""

    attempt = models.OneToOneField(Attempt, on_delete=models.CASCADE, related_name="output_manifest")
    state = models.CharField(max_length=16, choices=ManifestState.choices)
    reason = models.TextField(blank=True)
    store = models.CharField(max_length=16, choices=StoreKind.choices, default=StoreKind.DIRECTORY)
    # Where the store keeps this attempt's files (the directory store: a directory under RESULTS_DIR).
    location = models.CharField(max_length=1000, blank=True)

    class Meta:
        ordering = ["attempt_id"]

    def __str__(self) -> str:
        return f"outputs of {self.attempt_id}: {self.state}"


class OutputFile(BaseModel):
    """One output of an attempt: stored (bytes, SHA-256, the store's reference) or missing with the reason."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="output_files")
    name = models.CharField(max_length=500, help_text="Relative name: the path in the work directory, or under `to`.")
    state = models.CharField(max_length=16, choices=OutputState.choices)
    bytes = models.BigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    ref = models.CharField(max_length=2000, blank=True, help_text="The store's reference (its key of the file).")
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["attempt_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "name"], name="%(app_label)s_%(class)s_unique_name_per_attempt")
        ]

    def __str__(self) -> str:
        return self.name


class StorageReference(BaseModel):
    """One data reference an attempt used (docs/data.md): created for it or borrowed, and what became of it.

    Written when the attempt starts (one row per entry of its task's `data`), released when it ends. The row
    outlives its attempt (SET_NULL), so storage an attempt created and nobody removed stays on record."""

    attempt = models.ForeignKey(Attempt, on_delete=models.SET_NULL, null=True, related_name="storage_references")
    attempt_name = models.CharField(max_length=200, help_text="The attempt's external name, kept when it is gone.")
    connection = models.ForeignKey(CloudConnection, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", help_text="Its scope.")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    index = models.PositiveSmallIntegerField(help_text="Its place in the task's `data` (CLOUDPIVOT_DATA_<index>).")
    kind = models.CharField(max_length=16)
    ref = models.CharField(max_length=1000, help_text="Its identity: a claim, a volume, a host directory, a prefix.")
    name = models.CharField(max_length=40, blank=True)
    path = models.CharField(max_length=1000, blank=True)
    mode = models.CharField(max_length=2)
    role = models.CharField(max_length=16, choices=StorageRole.choices)
    state = models.CharField(max_length=16, choices=StorageState.choices, default=StorageState.IN_USE)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["attempt_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "index"], name="%(app_label)s_%(class)s_one_per_reference")
        ]
        indexes = [models.Index(fields=["role", "state"], name="results_storage_role_state")]

    def __str__(self) -> str:
        return f"{self.kind} {self.ref} ({self.role}, {self.state})"
