"""Writes for projects, memberships and tokens."""

from __future__ import annotations

import datetime as dt
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cloudpivot.accounts.models import ApiToken, Membership, Project, Role
from cloudpivot.accounts.selectors import project_role
from cloudpivot.common import sha256_hex
from cloudpivot.exceptions import Conflict, InvalidSpec, PermissionDenied


def api_token_create(
    *,
    user: AbstractBaseUser,
    name: str,
    expires_in: dt.timedelta | None = None,
    minted_with: ApiToken | None = None,
) -> tuple[ApiToken, str]:
    """Create a token and return it with its plain text, which is never stored and cannot be shown again.

    A token made with an expiring token (`minted_with`) never outlives it: asked for no expiry, it
    gets that token's; asked for a later one, it is refused. Otherwise a leaked short-lived token
    could be turned into a permanent one.
    """
    now = timezone.now()
    expires_at = now + expires_in if expires_in else None
    limit = minted_with.expires_at if minted_with else None
    if limit is not None:
        if expires_at is None:
            expires_at = limit
        elif expires_at > limit:
            message = (
                "a token made with an expiring token cannot outlive it: the token used for this request "
                f"expires at {limit.isoformat(timespec='seconds')}"
            )
            raise InvalidSpec(message, errors=[{"field": "expires_in_days", "message": message}])
    plain = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        token_hash=sha256_hex(plain),
        hint=plain[:10],
        expires_at=expires_at,
        minted_with=minted_with,
    )
    return token, plain


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke the token and every token made with it, and with those (a leaked token's offspring go with it).
    Each is saved on its own: the authentication cache forgets each (post_save)."""
    now = timezone.now()
    generation = [token]
    while generation:
        for each in generation:
            if each.revoked_at is None:
                each.revoked_at = now
                each.save(update_fields=["revoked_at", "updated_at"])
        generation = list(ApiToken.objects.filter(minted_with__in=generation, revoked_at__isnull=True))
    return token


def require_project_admin(*, actor: AbstractBaseUser, project: Project) -> None:
    """Managing a project's members is for its admins (platform staff count as admins everywhere)."""
    role = project_role(user=actor, project=project)
    if role != Role.ADMIN:
        raise PermissionDenied(f"your role in {project.slug} is {role or 'none'}; managing members needs admin")


def _role(role: str) -> Role:
    if role not in Role.values:
        message = f"unknown role '{role}'; one of {', '.join(Role.values)}"
        raise InvalidSpec(message, errors=[{"field": "role", "message": message}])
    return Role(role)


def _lock_project(project: Project) -> None:
    """Serialise member changes of one project, so two admins demoting each other cannot leave none."""
    Project.objects.select_for_update(no_key=True).filter(pk=project.pk).first()  # see tasks.services.admission


def _refuse_losing_last_admin(membership: Membership) -> None:
    others = Membership.objects.filter(project_id=membership.project_id, role=Role.ADMIN).exclude(pk=membership.pk)
    if membership.role == Role.ADMIN and not others.exists():
        name, slug = membership.user.get_username(), membership.project.slug
        message = f"{name} is the last admin of {slug}: make another member admin first"
        raise Conflict(message, errors=[{"field": "role", "message": message}], code="last_admin")


def membership_add(*, actor: AbstractBaseUser, project: Project, username: str, role: str) -> Membership:
    """Add a user (by username, or by an email address they verified) to the project. Only its admins (and
    platform staff) may. An address someone typed into their profile without verifying it finds nobody: it
    could be anyone's."""
    require_project_admin(actor=actor, project=project)
    role = _role(role)
    username = username.strip()
    verified = Q(emailaddress__email__iexact=username, emailaddress__verified=True)
    users = get_user_model().objects.filter(Q(username__iexact=username) | verified, is_active=True).distinct()
    matches = list(users[:2]) if username else []
    if len(matches) != 1:
        words = "no" if not matches else "more than one"
        message = f"{words} active user with the username or verified email '{username}'" if username else "name a user"
        raise InvalidSpec(message, errors=[{"field": "username", "message": message}])
    user = matches[0]
    with transaction.atomic():
        _lock_project(project)
        if Membership.objects.filter(project=project, user=user).exists():
            message = f"{user.get_username()} is already a member of {project.slug}"
            raise Conflict(message, errors=[{"field": "username", "message": message}], code="already_member")
        return Membership.objects.create(project=project, user=user, role=role)


def membership_change_role(*, actor: AbstractBaseUser, membership: Membership, role: str) -> Membership:
    """Give a member another role; the project's last admin keeps theirs."""
    require_project_admin(actor=actor, project=membership.project)
    role = _role(role)
    with transaction.atomic():
        _lock_project(membership.project)
        membership.refresh_from_db(fields=["role"])
        if role != Role.ADMIN:
            _refuse_losing_last_admin(membership)
        if membership.role != role:
            membership.role = role
            membership.save(update_fields=["role", "updated_at"])
    return membership


def membership_remove(*, actor: AbstractBaseUser, membership: Membership) -> None:
    """Take a member out of the project; the last admin cannot be removed (nobody could manage it then)."""
    require_project_admin(actor=actor, project=membership.project)
    with transaction.atomic():
        _lock_project(membership.project)
        membership.refresh_from_db(fields=["role"])
        _refuse_losing_last_admin(membership)
        membership.delete()
