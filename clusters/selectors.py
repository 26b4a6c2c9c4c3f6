"""Reads for cloud connections."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from clusters.models import CloudConnection


def connections_visible_to(*, user: AbstractBaseUser) -> QuerySet[CloudConnection]:
    """Connections granted to any project the user belongs to."""
    if user.is_superuser:
        return CloudConnection.objects.all()
    return CloudConnection.objects.filter(projects__memberships__user=user).distinct()
