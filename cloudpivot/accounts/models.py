"""Ownership: projects, memberships with roles, and API tokens."""

from __future__ import annotations

from django.conf import settings
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

    class Meta:
        ordering = ["user", "-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @property
    def is_active(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)
