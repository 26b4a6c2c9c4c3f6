"""What an attempt left behind: its manifest and one row per output file (docs/data.md)."""

from __future__ import annotations

from django.db import models

from cloudpivot.common import BaseModel
from results.choices import ManifestState, OutputState, StoreKind
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
