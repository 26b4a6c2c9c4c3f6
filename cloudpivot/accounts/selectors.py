"""Reads for projects and roles."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from cloudpivot.accounts.models import ROLE_RANK, Membership, Project, Role


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
