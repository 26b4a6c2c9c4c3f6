"""One-time bootstrap secrets: what a VM's user data carries instead of the attempt credential."""

from __future__ import annotations

from django.db import models

from cloudpivot.common import BaseModel


class BootstrapSecret(BaseModel):
    """The single-use secret a VM's Runner exchanges for its attempt credential (docs/runner.md, "Bootstrap").

    Only the SHA-256 is stored. Once `used_at` is set, or the attempt is closed, the secret grants nothing,
    so user data read back from the cloud later is worthless.
    """

    attempt = models.OneToOneField("tasks.Attempt", on_delete=models.CASCADE, related_name="bootstrap_secret")
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    used_at = models.DateTimeField(null=True, blank=True)
    used_from = models.CharField(max_length=64, blank=True, help_text="The address the exchange came from.")

    def __str__(self) -> str:
        return f"bootstrap secret of {self.attempt_id} ({'used' if self.used_at else 'unused'})"
