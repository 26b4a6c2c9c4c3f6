"""Will it fit? The verdict on a request before it is made: it starts now, waits (behind how many, held by
which limit) or never fits, naming the limiting resource and its numbers (docs/portal.md, docs/api.md).

The limits come from CloudPivot's quotas (tasks.services.fit, resources.fit) and from the cloud itself
(`ExecutionBackend.fit_limits`: a Kubernetes ResourceQuota, LimitRange and node allocatable, an OpenStack
project quota and the largest hypervisor). A limit that can never hold the request wins over one that is
only full now; the first found in that order is named. Only reads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any, Literal

from clusters.backends import get_backend
from clusters.backends.base import BackendError, FitLimit
from clusters.models import CloudConnection

Outcome = Literal["starts_now", "waits", "never_fits", "refused_now"]
# resource → (name, unit) in messages: "memory 65536 MB > 16384 MB"
WORDS = {
    "cpu": ("CPU", ""),
    "memory_mb": ("memory", " MB"),
    "gpu": ("GPUs", ""),
    "disk_gb": ("disk", " GB"),
    "tasks": ("tasks", ""),
    "instances": ("instances", ""),
    "pods": ("pods", ""),
    "jobs": ("Jobs", ""),
    "active_tasks": ("running tasks", ""),
}


def amount(value: Any) -> str:
    """4, 0.5, 2048: no trailing zeros."""
    return f"{Decimal(str(value)).normalize():f}"


def _words(limit: FitLimit) -> tuple[str, str]:
    return WORDS.get(limit.resource, (limit.resource, ""))


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    message: str
    limit: FitLimit | None = None
    queued_ahead: int = 0
    notes: list[str] = field(default_factory=list)  # cloud limits that could not be read, in words

    def as_dict(self) -> dict[str, Any]:
        limit = asdict(self.limit) if self.limit else None
        if limit:
            limit.update({key: _number(limit[key]) for key in ("requested", "available", "limit")})
        return {
            "outcome": self.outcome,
            "message": self.message,
            "limit": limit,
            "queued_ahead": self.queued_ahead,
            "notes": list(self.notes),
        }


def _number(value: Any) -> int | float | None:
    if value is None:
        return None
    number = float(value)
    return int(number) if number == int(number) else number


def starts_now(*, notes: list[str] | None = None) -> Verdict:
    return Verdict("starts_now", "Starts now", notes=list(notes or []))


def never_fits(limit: FitLimit, *, notes: list[str] | None = None) -> Verdict:
    if limit.resource == "flavor":  # the flavor itself is missing
        return Verdict("never_fits", f"Never fits: there is no {limit.source}", limit, notes=list(notes or []))
    name, unit = _words(limit)
    message = f"Never fits: {name} {amount(limit.requested)}{unit} > {amount(limit.limit)}{unit} ({limit.source})"
    return Verdict("never_fits", message, limit, notes=list(notes or []))


def waits(limit: FitLimit, *, ahead: int, notes: list[str] | None = None) -> Verdict:
    name, unit = _words(limit)
    used = max(Decimal(str(limit.limit)) - Decimal(str(limit.available)), Decimal(0))
    message = (
        f"Waits: {ahead} ahead, held by {limit.source}: {name} {amount(used)}/{amount(limit.limit)}{unit} in use, "
        f"asks {amount(limit.requested)}{unit}"
    )
    return Verdict("waits", message, limit, queued_ahead=ahead, notes=list(notes or []))


def held(reason: str, *, ahead: int, notes: list[str] | None = None) -> Verdict:
    """Waits for a reason that is not a resource: the connection's dispatch switch, a budget's hard stop."""
    return Verdict("waits", f"Waits: {ahead} ahead, held: {reason}", queued_ahead=ahead, notes=list(notes or []))


def refused_now(limit: FitLimit, *, notes: list[str] | None = None) -> Verdict:
    """An instance is not queued: what does not fit now is refused until something is freed."""
    name, unit = _words(limit)
    message = (
        f"Refused now: {name} {amount(limit.requested)}{unit} asked, {amount(limit.available)}{unit} left of "
        f"{amount(limit.limit)}{unit} ({limit.source})"
    )
    return Verdict("refused_now", message, limit, notes=list(notes or []))


def cloud_limits(connection: CloudConnection, asked: dict[str, Any]) -> tuple[list[FitLimit], list[str]]:
    """The cloud's own limits on the request; a cloud that cannot be read is a note, never an error."""
    try:
        return get_backend(connection).fit_limits(asked)
    except BackendError as exc:
        return [], [f"the {connection.cloud_id} cloud's own limits were not checked: {exc.message}"]


def first_never(limits: list[FitLimit]) -> FitLimit | None:
    return next((limit for limit in limits if limit.never), None)


def first_not_now(limits: list[FitLimit]) -> FitLimit | None:
    return next((limit for limit in limits if limit.not_now), None)
