"""How long a program gets between SIGTERM and SIGKILL when CloudPivot stops it (cancel, timeout, a hold's
release): the task's `stop_grace_seconds`, else the installation's STOP_GRACE_SECONDS. A program that
checkpoints on SIGTERM asks for the time it needs; the window before the backend stops the execution itself
grows with it."""

from __future__ import annotations

from typing import Any

from django.conf import settings

MAX_STOP_GRACE_SECONDS = 3600


def stop_grace_seconds(spec: dict[str, Any] | None) -> float:
    grace = (spec or {}).get("stop_grace_seconds")
    return float(settings.STOP_GRACE_SECONDS if grace is None else grace)


def stop_window_seconds(spec: dict[str, Any] | None) -> float:
    """The installation's window after a stop request, longer by as much as the task's grace is."""
    return settings.STOP_WINDOW_SECONDS + max(0.0, stop_grace_seconds(spec) - settings.STOP_GRACE_SECONDS)
