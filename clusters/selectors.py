"""Reads for cloud connections."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from cloudpivot.exceptions import InvalidSpec
from clusters.models import CloudConnection


def connections_visible_to(*, user: AbstractBaseUser) -> QuerySet[CloudConnection]:
    """Connections granted to any project the user belongs to."""
    if user.is_superuser:
        return CloudConnection.objects.all()
    return CloudConnection.objects.filter(projects__memberships__user=user).distinct()


def connection_for_user(*, user: AbstractBaseUser, cloud_id: str) -> CloudConnection:
    """The connection a request names in its `cloud` field (a task document, an instance create).

    An unknown or foreign cloud is the caller's field error, listing the clouds the user may use,
    not a 404: the request body named it, not the path.
    """
    connection = connections_visible_to(user=user).filter(cloud_id=cloud_id).first()
    if connection is None:
        available = ", ".join(connections_visible_to(user=user).values_list("cloud_id", flat=True)) or "none"
        raise InvalidSpec(
            f"unknown cloud '{cloud_id}'",
            errors=[{"field": "cloud", "message": f"unknown cloud '{cloud_id}'; clouds you may use: {available}"}],
        )
    return connection
