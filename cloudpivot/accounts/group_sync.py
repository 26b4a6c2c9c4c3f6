"""Project memberships from the OIDC group claim, applied on every OpenID Connect login.

For every project the map names, the user's membership is exactly what their current groups
grant: the highest role wins, no grant removes the membership. Projects the map does not name
are never touched, so admins still manage those by hand. Every change is an AuditEntry.
GitHub, GitLab and Gitea logins carry no group claim and leave memberships alone.
"""

from __future__ import annotations

import logging
from typing import Any

from allauth.account.signals import user_logged_in
from django.conf import settings
from django.db import transaction
from django.dispatch import receiver
from django.http import HttpRequest

from cloudpivot.accounts.audit import audit_save, catalogued
from cloudpivot.accounts.group_map import GroupMapError, configured_group_map, granted_roles, mapped_projects
from cloudpivot.accounts.models import AuditEntry, Membership, Project

logger = logging.getLogger(__name__)
GROUP_PROVIDERS = frozenset({"openid_connect"})


def claimed_groups(claims: dict[str, Any], claim: str) -> list[str]:
    """The group names in the claim; a missing claim is no group (Keycloak omits it when empty).

    Names are matched exactly as sent: with Keycloak's "full group path" option they are "/team/sub",
    and the map must use that form.
    """
    value = claims.get(claim)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(item) for item in value]
    return []


def memberships_sync_from_groups(
    *, user, groups: list[str], request: HttpRequest | None = None, source: str = ""
) -> list[AuditEntry]:
    """Make the user's memberships in the mapped projects what `groups` grant; returns the audit entries."""
    try:
        group_map = configured_group_map()
    except GroupMapError as exc:  # the system check reports this at startup; a login must not fail on it
        logger.error("CLOUDPIVOT_OIDC_GROUP_MAP is invalid, memberships left as they are: %s", exc)
        return []
    if not group_map:
        return []
    granted = granted_roles(group_map, groups)
    slugs = mapped_projects(group_map)
    projects = {project.slug: project for project in Project.objects.filter(slug__in=slugs)}
    for missing in sorted(slugs - projects.keys()):
        logger.warning("CLOUDPIVOT_OIDC_GROUP_MAP names project %r, which does not exist; skipped", missing)
    entries = []
    with transaction.atomic():
        current = {
            m.project.slug: m
            for m in Membership.objects.select_for_update().filter(user=user, project__in=projects.values())
        }
        for slug, project in sorted(projects.items()):
            membership, role = current.get(slug), granted.get(slug)
            before = membership.role if membership else None
            if role == before:
                continue
            if role is None:
                membership.delete()
                action = "accounts:membership-revoke"
            elif membership is None:
                Membership.objects.create(project=project, user=user, role=role)
                action = "accounts:membership-grant"
            else:
                membership.role = role
                membership.save(update_fields=["role", "updated_at"])
                action = "accounts:membership-change"
            entries.append(_audit(request, user, action, project, before, role, groups, source))
    return entries


def _audit(request, user, action, project, before, after, groups, source) -> AuditEntry:
    entry = AuditEntry(
        actor=user,
        actor_name=user.get_username(),
        via="login",
        action=action,
        method=request.method if request else "",
        path=request.path[:500] if request else "",
        object_ref=f"{project.slug}:{user.get_username()}"[:200],
        status_code=200,  # part of a login that went through; the callback's own response is a redirect
        outcome="ok",
        remote_addr=(request.META.get("REMOTE_ADDR") or None) if request else None,
        details={
            "project": project.slug,
            "role_before": before,
            "role_after": after,
            "groups": groups,
            "source": source,
        },
    )
    return audit_save(catalogued(entry))


@receiver(user_logged_in, dispatch_uid="cloudpivot-oidc-group-sync")
def _on_login(sender, request, user, sociallogin=None, **kwargs) -> None:
    # sociallogin.provider is the provider instance; its `id` is the kind, its app's provider_id the name.
    if sociallogin is None:
        return
    provider = getattr(sociallogin, "provider", None) or sociallogin.account.get_provider(request)
    if provider.id not in GROUP_PROVIDERS:
        return
    if sociallogin.account.provider not in settings.CLOUDPIVOT_OIDC_GROUP_PROVIDERS:
        logger.info(
            "group claims of OpenID Connect provider %r are not trusted (CLOUDPIVOT_OIDC_GROUP_PROVIDERS); "
            "memberships left as they are",
            sociallogin.account.provider,
        )
        return
    claim = settings.CLOUDPIVOT_OIDC_GROUPS_CLAIM
    data = sociallogin.account.extra_data or {}
    # allauth keeps {"userinfo": ..., "id_token": ...}; a group claim in either counts.
    groups = claimed_groups(data.get("userinfo") or {}, claim) + claimed_groups(data.get("id_token") or {}, claim)
    memberships_sync_from_groups(
        user=user,
        groups=sorted(set(groups)),
        request=request,
        source=f"oidc:{sociallogin.account.provider}",  # the app's provider_id, e.g. "keycloak"
    )
