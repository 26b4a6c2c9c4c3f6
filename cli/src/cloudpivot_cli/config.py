"""Named contexts (server URL + token), like kubectl's, in one 0600 YAML file.

$XDG_CONFIG_HOME/cloudpivot/config.yaml (or ~/.config/cloudpivot/config.yaml); CLOUDPIVOT_URL and
CLOUDPIVOT_TOKEN override the selected context, CLOUDPIVOT_CONTEXT or --context select another one.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml


class ConfigError(Exception):
    """The configuration cannot give a server to talk to (the message says what to run)."""


@dataclass(frozen=True)
class Target:
    url: str
    token: str
    context: str | None


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cloudpivot" / "config.yaml"


def load() -> dict:
    path = config_path()
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        return {"current-context": None, "contexts": {}}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("contexts", {}), dict):
        raise ConfigError(f"{path} is not a cloudpivot configuration")
    data.setdefault("contexts", {})
    data.setdefault("current-context", None)
    return data


def save(data: dict) -> Path:
    """Write atomically, readable by the owner only (the file holds tokens)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".yaml")  # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w") as handle:
            yaml.safe_dump(data, handle, sort_keys=False)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def set_context(name: str, *, url: str, token: str) -> Path:
    data = load()
    data["contexts"][name] = {"url": url.rstrip("/"), "token": token}
    data["current-context"] = name
    return save(data)


def use_context(name: str) -> Path:
    data = load()
    if name not in data["contexts"]:
        known = ", ".join(sorted(data["contexts"])) or "none; run `cloudpivot login`"
        raise ConfigError(f"no context named {name!r} (known: {known})")
    data["current-context"] = name
    return save(data)


def delete_context(name: str) -> Path:
    data = load()
    if data["contexts"].pop(name, None) is None:
        raise ConfigError(f"no context named {name!r}")
    if data["current-context"] == name:
        data["current-context"] = next(iter(data["contexts"]), None)
    return save(data)


def resolve(context: str | None = None) -> Target:
    """The server and token to use: the environment first, then the named or current context."""
    data = load()
    name = context or os.environ.get("CLOUDPIVOT_CONTEXT") or data["current-context"]
    entry = data["contexts"].get(name, {}) if name else {}
    if context and not entry:
        raise ConfigError(f"no context named {context!r}; `cloudpivot context list` shows them")
    url = os.environ.get("CLOUDPIVOT_URL") or entry.get("url")
    token = os.environ.get("CLOUDPIVOT_TOKEN") or entry.get("token")
    if not url:
        raise ConfigError("no server configured: run `cloudpivot login --url URL` or set CLOUDPIVOT_URL")
    if not token:
        raise ConfigError("no token configured: run `cloudpivot login` or set CLOUDPIVOT_TOKEN")
    return Target(url=url.rstrip("/"), token=token, context=name if entry else None)
