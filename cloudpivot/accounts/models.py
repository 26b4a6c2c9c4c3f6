"""Ownership: projects, memberships with roles, and API tokens."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from cloudpivot.common import BaseModel


class Role(models.TextChoices):
    READER = "reader", "Reader"
    SUBMITTER = "submitter", "Submitter"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.READER: 1, Role.SUBMITTER: 2, Role.ADMIN: 3}


class Project(BaseModel):
    """The unit of ownership and quota: a team, a lab, a business system."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(BaseModel):
    """A user's role in one project."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.SUBMITTER)

    class Meta:
        ordering = ["project", "user"]
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="%(app_label)s_%(class)s_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class ApiToken(BaseModel):
    """A bearer token for business systems and the CLI. Only its SHA-256 is stored; the token is shown once."""

    PREFIX = "cpt_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=12, editable=False, help_text="The first characters, to recognise a token.")
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The token this one was made with (POST /api/v1/tokens with a token): revoking that one revokes this one.
    minted_with = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="minted", editable=False
    )

    class Meta:
        ordering = ["user", "-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @property
    def is_active(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class SshKey(BaseModel):
    """An SSH public key a user keeps in their settings; new instances of theirs get the ones they choose.

    Only the public half is ever accepted (cloudpivot.accounts.ssh_keys refuses private keys); the
    fingerprint (SHA256, as `ssh-keygen -l` prints it) is how people recognise a key.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(max_length=64)
    key_type = models.CharField(max_length=64, editable=False)
    public_key = models.TextField(help_text="One OpenSSH public key line: type, base64 and an optional comment.")
    fingerprint = models.CharField(max_length=80, editable=False)

    class Meta:
        ordering = ["user", "name"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="%(app_label)s_%(class)s_unique_name"),
            models.UniqueConstraint(fields=["user", "fingerprint"], name="%(app_label)s_%(class)s_unique_key"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"

    @property
    def comment(self) -> str:
        """The key line's comment (often user@host), if it has one."""
        parts = self.public_key.split(None, 2)
        return parts[2] if len(parts) > 2 else ""


class Quota(BaseModel):
    """Limits for one project, on one connection or (connection empty) across all of them. Empty = no limit."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="quotas")
    connection = models.ForeignKey(
        "clusters.CloudConnection",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="quotas",
        help_text="Empty: the limits apply to the project's use of all connections together.",
    )
    max_tasks = models.PositiveIntegerField(null=True, blank=True, help_text="Tasks active at once.")
    max_vcpu = models.DecimalField(max_digits=8, decimal_places=3, null=True, blank=True)
    max_memory_mb = models.PositiveBigIntegerField(null=True, blank=True)
    max_gpus = models.PositiveIntegerField(null=True, blank=True)
    max_instances = models.PositiveIntegerField(null=True, blank=True, help_text="Persistent VM instances.")
    max_volume_gb = models.PositiveIntegerField(
        null=True, blank=True, help_text="Instances' root disks and volumes, in GB."
    )
    max_snapshots = models.PositiveIntegerField(null=True, blank=True, help_text="Kept snapshots; oldest pruned.")
    max_snapshot_gb = models.PositiveIntegerField(null=True, blank=True, help_text="Snapshot GB; oldest pruned.")
    snapshot_retention_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="Snapshots older than this are pruned."
    )

    class Meta:
        ordering = ["project", "connection"]
        constraints = [
            models.UniqueConstraint(fields=["project", "connection"], name="%(app_label)s_%(class)s_unique"),
            models.UniqueConstraint(
                fields=["project"],
                condition=models.Q(connection__isnull=True),
                name="%(app_label)s_%(class)s_unique_project_wide",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project} on {self.connection or 'all clouds'}"


SECRET_NAME_HELP = "Lowercase letters, digits and '-', e.g. db-password; tasks refer to the secret by it."
secret_name_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", "use lowercase letters, digits and '-' (at most 63), e.g. db-password"
)


class ProjectSecret(BaseModel):
    """A value a project's tasks receive at run time (an env variable or a file), never shown again once saved.

    Only its Fernet token is stored (cloudpivot.secret_box); the task document names it, never holds it.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=63, validators=[secret_name_validator], help_text=SECRET_NAME_HELP)
    value_encrypted = models.TextField(editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="%(app_label)s_%(class)s_unique")]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"


class AuditEntry(models.Model):
    """Who did what, when, from where, with which outcome: one row per mutating request. Read-only."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="Kept if the user is deleted.")
    via = models.CharField(max_length=16, help_text="api, page or admin")
    action = models.CharField(max_length=100, help_text="What was asked, e.g. tasks-api:task-cancel")
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=500)
    object_ref = models.CharField(max_length=200, blank=True)
    status_code = models.PositiveSmallIntegerField()
    outcome = models.CharField(max_length=16, help_text="ok, refused or error")
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.outcome}"
