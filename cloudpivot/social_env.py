"""Login providers from the environment, as allauth's SOCIALACCOUNT_PROVIDERS (apps kept in settings, not the DB).

Two ways, which add up:
- one generic OpenID Connect provider (Keycloak and the like) from CLOUDPIVOT_OIDC_SERVER_URL,
  CLOUDPIVOT_OIDC_CLIENT_ID and CLOUDPIVOT_OIDC_CLIENT_SECRET (or CLOUDPIVOT_OIDC_CLIENT_SECRET_FILE);
- any number of providers from CLOUDPIVOT_AUTH_PROVIDERS (or CLOUDPIVOT_AUTH_PROVIDERS_FILE), a JSON list of
  {"provider": "openid_connect"|"github"|"gitlab"|"gitea", "client_id", "secret", ...}.

Admins may also add providers in the Django admin (allauth's "Social applications"); allauth lists both.
Pure functions of their input: settings call them, tests call them with a dict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

SUPPORTED = ("openid_connect", "github", "gitlab", "gitea")
# The provider-wide setting that points allauth at a self-hosted instance.
INSTANCE_URL_SETTING = {"gitlab": "GITLAB_URL", "gitea": "GITEA_URL"}


def providers_from_env(getenv: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """SOCIALACCOUNT_PROVIDERS built from the variables above; `getenv(name)` returns "" when unset."""
    entries: list[Mapping[str, Any]] = []
    if getenv("CLOUDPIVOT_OIDC_SERVER_URL"):
        entries.append(
            {
                "provider": "openid_connect",
                "id": getenv("CLOUDPIVOT_OIDC_ID") or "oidc",
                "name": getenv("CLOUDPIVOT_OIDC_NAME") or "Single sign-on",
                "server_url": getenv("CLOUDPIVOT_OIDC_SERVER_URL"),
                "client_id": getenv("CLOUDPIVOT_OIDC_CLIENT_ID"),
                "secret": getenv("CLOUDPIVOT_OIDC_CLIENT_SECRET"),
            }
        )
    raw = getenv("CLOUDPIVOT_AUTH_PROVIDERS")
    if raw:
        try:
            listed = json.loads(raw)
        except ValueError as exc:
            raise ImproperlyConfigured(f"CLOUDPIVOT_AUTH_PROVIDERS is not valid JSON: {exc.msg}") from None
        if not isinstance(listed, list) or not all(isinstance(item, dict) for item in listed):
            raise ImproperlyConfigured("CLOUDPIVOT_AUTH_PROVIDERS must be a JSON list of objects")
        entries.extend(listed)
    providers: dict[str, dict[str, Any]] = {}
    for position, entry in enumerate(entries):
        kind, app, instance_url = _app(entry, position)
        config = providers.setdefault(kind, {"APPS": []})
        config["APPS"].append(app)
        if instance_url:
            config[INSTANCE_URL_SETTING[kind]] = instance_url.rstrip("/")
    # PKCE on every OpenID Connect login: Keycloak, GitLab and django-oauth-toolkit support it.
    providers.setdefault("openid_connect", {})["OAUTH_PKCE_ENABLED"] = True
    return providers


def _app(entry: Mapping[str, Any], position: int) -> tuple[str, dict[str, Any], str]:
    """One allauth app config from one entry. Errors name the entry and field, never the secret's value."""
    where = f"login provider #{position + 1}"
    kind = entry.get("provider", "")
    if kind not in SUPPORTED:
        raise ImproperlyConfigured(f"{where}: 'provider' must be one of {', '.join(SUPPORTED)}, not {kind!r}")
    for field in ("client_id", "secret"):
        if not entry.get(field):
            raise ImproperlyConfigured(f"{where} ({kind}): '{field}' is required")
    app: dict[str, Any] = {"client_id": entry["client_id"], "secret": entry["secret"], "settings": {}}
    if kind == "openid_connect":
        if not entry.get("server_url") or not entry.get("id"):
            raise ImproperlyConfigured(f"{where} (openid_connect): 'id' and 'server_url' are required")
        app["provider_id"] = entry["id"]
        app["settings"]["server_url"] = entry["server_url"]
    app["name"] = entry.get("name") or entry.get("id") or kind.replace("_", " ").title()
    if entry.get("scope"):
        app["settings"]["scope"] = list(entry["scope"])
    instance_url = entry.get("url", "") if kind in INSTANCE_URL_SETTING else ""
    return kind, app, instance_url
