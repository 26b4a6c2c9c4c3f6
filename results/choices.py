"""The states of an attempt's outputs (docs/data.md), declared once."""

from __future__ import annotations

from django.db import models


class OutputState(models.TextChoices):
    STORED = "stored", "Stored"  # the bytes are in the store, with their size and SHA-256
    MISSING = "missing", "Missing"  # declared (or matched) but not kept; `reason` says why


class ManifestState(models.TextChoices):
    COMPLETE = "complete", "Complete"  # every declared output was matched and stored
    INCOMPLETE = "incomplete", "Incomplete"  # something is missing; `reason` says what and why


class StoreKind(models.TextChoices):
    DIRECTORY = "directory", "Directory on the CloudPivot host"
    SWIFT = "swift", "OpenStack object store (Swift)"  # written and read through temporary URLs


class StorageRole(models.TextChoices):
    """Whether the attempt made the storage itself (and so must remove it, unless kept) or used what exists."""

    CREATED = "created", "Created for the attempt"
    BORROWED = "borrowed", "Borrowed"


class StorageState(models.TextChoices):
    IN_USE = "in_use", "In use"  # the attempt runs with it
    RELEASED = "released", "Released"  # the attempt ended; borrowed storage is left as it was
    DELETED = "deleted", "Deleted"  # created storage, removed after the attempt
    KEPT = "kept", "Kept"  # created storage the task asked to keep (`keep: true`)
