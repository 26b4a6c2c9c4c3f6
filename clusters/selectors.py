"""Reads for cloud connections."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from cloudpivot.accounts.models import Project, Role
from cloudpivot.accounts.selectors import project_for_submission, roles_at_least
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


def submission_target(*, user: AbstractBaseUser, cloud_id: str, slug: str | None) -> tuple[CloudConnection, Project]:
    """The connection a submit names in `cloud` and the project it goes to (`project`, or else the only one).

    Never kept between requests (unlike the quotas, cloudpivot/recent.py): admission does not check the grant
    or the membership again, so a withdrawn one must refuse the very next submit in every process.

    The usual case in one query: exactly one project (the named one, if named) is granted this cloud and the
    user is submitter or admin in it, or platform staff (who act as admins in every project, as
    project_for_submission says). Anything else (no such project, several) goes the longer way,
    connection_for_user and project_for_submission, which word each refusal.
    """
    grants = CloudConnection.projects.through.objects.filter(cloudconnection__cloud_id=cloud_id)
    if not user.is_superuser:
        grants = grants.filter(
            project__memberships__user=user, project__memberships__role__in=roles_at_least(Role.SUBMITTER)
        )
    if slug:
        grants = grants.filter(project__slug=slug)
    found = list(grants.select_related("cloudconnection", "project")[:2])
    if len(found) == 1:
        return found[0].cloudconnection, found[0].project
    connection = connection_for_user(user=user, cloud_id=cloud_id)
    return connection, project_for_submission(user=user, connection=connection, slug=slug)


def connection_granted(*, connection_id: Any, project_id: Any) -> bool:
    """Whether an admin grants this connection to this project (its *Projects*): what the project may use."""
    return CloudConnection.objects.filter(pk=connection_id, projects=project_id).exists()


def grant_withdrawn_words(*, cloud_id: str, project_slug: str) -> str:
    """The one sentence for everything refused or stopped because a project lost its grant on a cloud."""
    return f"project {project_slug} may no longer use {cloud_id} (an administrator removed its access)"
