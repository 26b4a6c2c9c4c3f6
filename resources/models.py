"""Persistent VM instances, their snapshots, and the Operation log of every write action (DESIGN §7).

Only resources.services writes these rows; status fields are observations, never wishes.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from cloudpivot.accounts.models import Project
from cloudpivot.common import BaseModel
from clusters.models import CloudConnection
from resources.choices import Action, InstanceStatus, OperationState, PowerState, SnapshotStatus


class ImmutableFieldChanged(Exception):
    """Owner and project are fixed at create; the owner changes only through instance_owner_change."""


class Instance(BaseModel):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=63)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="instances")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="instances")
    connection = models.ForeignKey(CloudConnection, on_delete=models.PROTECT, related_name="instances")
    backend = models.CharField(max_length=16, editable=False, help_text="Copied from the connection at create.")
    flavor = models.CharField(max_length=100)
    vcpus = models.PositiveIntegerField(help_text="From the flavor: what counts against quotas.")
    memory_mb = models.PositiveIntegerField()
    disk_gb = models.PositiveIntegerField(default=0, help_text="The flavor's root disk (counts as volume GB).")
    image = models.CharField(max_length=255, help_text="The image (or snapshot image) the server boots from.")
    desired_power_state = models.CharField(max_length=8, choices=PowerState.choices, default=PowerState.RUNNING)
    boot_id = models.PositiveIntegerField(default=1, help_text="Raised by each explicit start; a retry repeats it.")
    status = models.CharField(max_length=16, choices=InstanceStatus.choices, default=InstanceStatus.PENDING)
    status_reason = models.TextField(blank=True)
    status_changed_at = models.DateTimeField(auto_now_add=True)
    observed_at = models.DateTimeField(null=True, blank=True, help_text="The last time the cloud was looked at.")
    operation = models.ForeignKey(
        "Operation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The operation in flight, if any.",
    )
    server_id = models.CharField(max_length=64, blank=True, help_text="The cloud's id (a Nova server UUID).")
    root_volume_ref = models.CharField(max_length=64, blank=True, help_text="Kept on delete unless purged.")
    volumes = models.JSONField(
        default=list, blank=True, help_text="Blank data volumes asked for at create: [{name, size_gb}]."
    )
    volumes_gb = models.PositiveIntegerField(default=0, help_text="Those volumes' GB (count as volume GB).")
    ssh_keys = models.JSONField(
        default=list, blank=True, help_text="The owner's keys it was given at create: [{name, fingerprint}]."
    )
    authorized_keys = models.TextField(blank=True, help_text="Those keys' lines, as the guest gets them.")
    login_user = models.CharField(max_length=32, blank=True, help_text="The user cloud-init makes for the keys.")
    address = models.CharField(max_length=64, blank=True, help_text="The address the cloud reports, as last seen.")
    # Running is the hypervisor's word; ready is the guest's (resources/services/readiness.py).
    ready = models.BooleanField(default=False, help_text="The guest answered since its last boot (agent, marker, SSH).")
    readiness_reason = models.TextField(blank=True, help_text="Booting: what it waits for; ready: what showed it.")
    readiness_changed_at = models.DateTimeField(null=True, blank=True)
    boot_baseline = models.TextField(
        blank=True, help_text="What the previous boot left (its console marker, its VMI uid), read before this boot."
    )
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"], name="resources_instance_project")]

    def __str__(self) -> str:
        return f"{self.name} ({self.short_id})"

    @property
    def short_id(self) -> str:
        return self.id.hex[:8]

    @property
    def readiness(self) -> str:
        """ "ready" or "booting" while the server runs ("" otherwise: a stopped or paused guest is neither)."""
        if self.status != InstanceStatus.RUNNING:
            return ""
        return "ready" if self.ready else "booting"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            before = Instance.objects.filter(pk=self.pk).values("project_id", "owner_id").first()
            if before and before["project_id"] != self.project_id:
                raise ImmutableFieldChanged("an instance's project cannot change")
            if before and before["owner_id"] != self.owner_id and not getattr(self, "_owner_change", False):
                raise ImmutableFieldChanged("an instance's owner changes only through instance_owner_change")
        super().save(*args, **kwargs)


class Snapshot(BaseModel):
    """A disk image of an instance, owned by a project: restores go only into that project."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="snapshots")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="snapshots")
    connection = models.ForeignKey(CloudConnection, on_delete=models.PROTECT, related_name="snapshots")
    instance = models.ForeignKey(Instance, null=True, blank=True, on_delete=models.SET_NULL, related_name="snapshots")
    image_id = models.CharField(max_length=64, blank=True, help_text="The cloud's image id (Glance).")
    size_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=SnapshotStatus.choices, default=SnapshotStatus.CREATING)
    status_reason = models.TextField(blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id.hex[:8]})"


class KeptVolume(BaseModel):
    """A disk a delete kept (`volumes: keep`): it holds its GB of the project's volume quota until reclaimed.

    Reclaiming is an Operation (action volume_reclaim) that deletes the disk in the cloud only after checking
    that no server or VM uses it; `reclaimed_at` is set once the cloud shows it gone.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="kept_volumes")
    connection = models.ForeignKey(CloudConnection, on_delete=models.PROTECT, related_name="kept_volumes")
    instance = models.ForeignKey(Instance, on_delete=models.PROTECT, related_name="kept_volumes")
    ref = models.CharField(max_length=255, help_text='How the cloud names it: "datavolume/<name>", "pvc/<name>".')
    size_gb = models.PositiveIntegerField(default=0, help_text="What it holds of max_volume_gb until reclaimed.")
    reclaimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "ref"],
                condition=Q(reclaimed_at__isnull=True),
                name="resources_keptvolume_unique_live_ref",
            )
        ]

    def __str__(self) -> str:
        return self.ref


class Operation(BaseModel):
    """One write action on an instance or snapshot: who asked what, when, and what the cloud showed after."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="operations")
    instance = models.ForeignKey(
        Instance,
        null=True,
        blank=True,
        on_delete=models.PROTECT,  # the log outlives nothing it describes: an instance with operations stays
        related_name="operations",
    )
    snapshot = models.ForeignKey(Snapshot, null=True, blank=True, on_delete=models.SET_NULL, related_name="operations")
    action = models.CharField(max_length=20, choices=Action.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="operations",
        help_text="Empty: CloudPivot itself (a schedule).",
    )
    idempotency_key = models.CharField(max_length=200, blank=True)
    request_sha256 = models.CharField(max_length=64, blank=True)
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=OperationState.choices, default=OperationState.PENDING)
    error_kind = models.CharField(max_length=32, blank=True)
    error_message = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The worker running it (resources.services.lease): a lease renewed while it runs, so that one killed
    # mid-way is resumed once the lease runs out, and one merely slow in a cloud call is left alone.
    claimed_by = models.CharField(max_length=120, blank=True, help_text="host:pid:claim of the worker running it.")
    lease_until = models.DateTimeField(null=True, blank=True, help_text="Renewed while its worker lives.")
    resumes = models.PositiveSmallIntegerField(default=0, help_text="Times a new worker took it over.")
    called_at = models.DateTimeField(
        null=True, blank=True, help_text="When the cloud accepted the action (a resume does not ask again)."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["requested_by", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="resources_operation_unique_idempotency_key",
            )
        ]
        indexes = [models.Index(fields=["instance", "-created_at"], name="resources_operation_instance")]

    def __str__(self) -> str:
        return f"{self.action} {self.id.hex[:8]} ({self.state})"
