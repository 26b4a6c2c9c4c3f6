"""Environment access for settings: django-environ plus `envsecret` for mounted secrets."""

from __future__ import annotations

from pathlib import Path

import environ

env = environ.Env()


def envsecret(name: str, default: str = "") -> str:
    """Prefer NAME_FILE (a mounted secret) over NAME, so secrets need not sit in the environment."""
    path = env.str(f"{name}_FILE", default="")
    if path:
        return Path(path).read_text().strip()
    return env.str(name, default=default)
