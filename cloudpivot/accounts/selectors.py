"""Reads for projects and roles."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Model, QuerySet

from cloudpivot.accounts.models import ROLE_RANK, Membership, Project, Role
from cloudpivot.exceptions import InvalidSpec, PermissionDenied


def projects_visible_to(*, user: AbstractBaseUser) -> QuerySet[Project]:
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def project_role(*, user: AbstractBaseUser, project: Project) -> str | None:
    """The user's role in the project; platform staff act as project admins everywhere."""
    if user.is_superuser:
        return Role.ADMIN
    membership = Membership.objects.filter(user=user, project=project).only("role").first()
    return membership.role if membership else None


def role_at_least(role: str | None, needed: str) -> bool:
    return role is not None and ROLE_RANK[Role(role)] >= ROLE_RANK[Role(needed)]


def check_owner_or_admin(*, user: AbstractBaseUser, project: Project, owner_id: Any, what: str) -> None:
    """Cancel and retry of something one user made in a project (a task, a task set, named `what` in the words):
    project admins may on anyone's, submitters on their own, readers never."""
    role = project_role(user=user, project=project)
    if role_at_least(role, Role.ADMIN):
        return
    if role_at_least(role, Role.SUBMITTER) and owner_id == user.pk:
        return
    raise PermissionDenied(
        f"your role in {project.slug} ({role}) does not allow this on another user's {what}"
        if role == Role.SUBMITTER
        else f"your role in {project.slug} is {role}; cancel and retry need submitter or admin"
    )


def roles_at_least(needed: str) -> list[str]:
    return [role for role, rank in ROLE_RANK.items() if rank >= ROLE_RANK[Role(needed)]]


def projects_user_may_submit_to(*, user: AbstractBaseUser, connection_id: Any) -> QuerySet[Project]:
    """The projects granted this connection in which the user is submitter or admin, in one query
    (not a membership query per granted project: a submit without a `project` asks this)."""
    granted = Project.objects.filter(connections=connection_id)
    if user.is_superuser:
        return granted
    return granted.filter(memberships__user=user, memberships__role__in=roles_at_least(Role.SUBMITTER))


def project_for_submission(*, user: AbstractBaseUser, connection: Model, slug: str | None) -> Project:
    """The project a request (a task, an instance) is made in: the named one, or else the only project
    through which the user may submit to this connection.

    `connection` is a clusters CloudConnection; accounts sits below clusters, so it is read only through
    the projects' side of the grant (`Project.connections`) and its `cloud_id`, never imported.
    """
    cloud_id = connection.cloud_id
    if slug:
        project = Project.objects.filter(slug=slug).first()
        role = project_role(user=user, project=project) if project else None
        if project is None or role is None:
            raise InvalidSpec(
                f"unknown project '{slug}'",
                errors=[{"field": "project", "message": f"you are not a member of a project '{slug}'"}],
            )
        if not role_at_least(role, Role.SUBMITTER):
            raise PermissionDenied(f"your role in {slug} is {role}; submitting needs submitter or admin")
        if not project.connections.filter(pk=connection.pk).exists():
            raise InvalidSpec(
                f"project {slug} may not use cloud {cloud_id}",
                errors=[{"field": "cloud", "message": f"project {slug} may not use cloud {cloud_id}"}],
            )
        return project
    candidates = list(projects_user_may_submit_to(user=user, connection_id=connection.pk))
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise PermissionDenied(f"none of your projects lets you submit to {cloud_id}")
    names = ", ".join(p.slug for p in candidates)
    message = f"you may submit to {cloud_id} through several projects ({names}); name one"
    raise InvalidSpec("name a project", errors=[{"field": "project", "message": message}])
