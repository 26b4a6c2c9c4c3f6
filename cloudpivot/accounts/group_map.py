"""The OIDC group map setting (CLOUDPIVOT_OIDC_GROUP_MAP), parsed and validated in one place.

Shape: {"<group>": {"<project slug>": "<role>"}}. One group may grant several projects; several
groups may name one project (the highest role wins). The system check (checks.py) reports a bad map
at startup; a login never fails on it.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from cloudpivot.accounts.models import ROLE_RANK, Role

GroupMap = dict[str, dict[str, str]]


class GroupMapError(ValueError):
    pass


def parse_group_map(value: str | dict[str, Any] | None) -> GroupMap:
    """The map as {group: {slug: role}}; GroupMapError names the bad part (no secrets live here)."""
    if not value:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise GroupMapError(f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})") from None
    if not isinstance(value, dict):
        raise GroupMapError('must be a JSON object {"<group>": {"<project slug>": "<role>"}}')
    roles = ", ".join(Role.values)
    parsed: GroupMap = {}
    for group, grants in value.items():
        if not isinstance(grants, dict) or not grants:
            raise GroupMapError(f'group {group!r}: must map to {{"<project slug>": "<role>"}}, not {grants!r}')
        for slug, role in grants.items():
            if role not in Role.values:
                raise GroupMapError(f"group {group!r}, project {slug!r}: role must be one of {roles}, not {role!r}")
        parsed[group] = dict(grants)
    return parsed


def configured_group_map() -> GroupMap:
    return parse_group_map(getattr(settings, "CLOUDPIVOT_OIDC_GROUP_MAP", ""))


def granted_roles(group_map: GroupMap, groups: list[str]) -> dict[str, str]:
    """{slug: role} that `groups` grant under the map, the highest role for each project."""
    granted: dict[str, str] = {}
    for group in groups:
        for slug, role in group_map.get(group, {}).items():
            if slug not in granted or ROLE_RANK[role] > ROLE_RANK[granted[slug]]:
                granted[slug] = role
    return granted


def mapped_projects(group_map: GroupMap) -> set[str]:
    return {slug for grants in group_map.values() for slug in grants}
