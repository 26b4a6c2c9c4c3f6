"""System checks for the login settings: a bad group map is a configuration error at startup, not a 500 at login."""

from __future__ import annotations

from django.core.checks import Error, Warning, register
from django.db import DatabaseError

from cloudpivot.accounts.group_map import GroupMapError, configured_group_map, mapped_projects

HINT = 'CLOUDPIVOT_OIDC_GROUP_MAP is JSON {"<group>": {"<project slug>": "reader"|"submitter"|"admin"}}.'


@register("cloudpivot")
def group_map_check(app_configs, **kwargs):
    try:
        group_map = configured_group_map()
    except GroupMapError as exc:
        return [Error(f"CLOUDPIVOT_OIDC_GROUP_MAP is invalid: {exc}", hint=HINT, id="cloudpivot.E101")]
    slugs = mapped_projects(group_map)
    if not slugs:
        return []
    from cloudpivot.accounts.models import Project

    try:
        known = set(Project.objects.filter(slug__in=slugs).values_list("slug", flat=True))
    except DatabaseError:
        # Before the first migrate there is no project table: nothing to compare with yet.
        return [
            Warning(
                "CLOUDPIVOT_OIDC_GROUP_MAP could not be checked against the projects (no database yet?)",
                id="cloudpivot.W102",
            )
        ]
    return [
        Error(
            f"CLOUDPIVOT_OIDC_GROUP_MAP names project {slug!r}, which does not exist",
            hint="Create the project first (admin → Projects), or fix the slug in the map.",
            id="cloudpivot.E102",
        )
        for slug in sorted(slugs - known)
    ]


@register("cloudpivot")
def secrets_key_check(app_configs, **kwargs):
    """A CLOUDPIVOT_SECRETS_KEY that is not a Fernet key: said at startup, not as a 500 on the first secret saved."""
    from django.conf import settings

    from cloudpivot.secret_box import key_problem

    problem = key_problem(settings.CLOUDPIVOT_SECRETS_KEY)
    if not problem:
        return []
    hint = "Generate one: python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
    return [Error(f"CLOUDPIVOT_SECRETS_KEY is unusable: {problem}", hint=hint, id="cloudpivot.E103")]


@register("cloudpivot")
def api_token_rate_check(app_configs, **kwargs):
    """A CLOUDPIVOT_API_TOKEN_RATE that is not a rate: said at startup, not as a 500 on every API call."""
    from django.conf import settings

    from cloudpivot.accounts.throttling import parse_rate

    try:
        parse_rate(settings.API_TOKEN_RATE)
    except ValueError as exc:
        return [
            Error(
                f"CLOUDPIVOT_API_TOKEN_RATE is invalid: {exc}", hint="e.g. 1200/min; 0 lifts it", id="cloudpivot.E104"
            )
        ]
    return []
