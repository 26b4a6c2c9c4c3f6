"""The interface every cloud backend implements, and the plain data that crosses it.

Backends never touch Task state or the ORM: services hand them plain data and record
what they answer (DESIGN §4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from cloudpivot.exceptions import BackendError, ErrorKind
from clusters.models import CloudConnection

# The cloud errors are declared with their API mapping (cloudpivot.exceptions.cloud_error); backends import them here.
__all__ = [
    "AttemptRef",
    "BackendError",
    "ErrorKind",
    "ExecutionBackend",
    "ExternalRef",
    "Health",
    "LogPiece",
    "Observation",
]


@dataclass(frozen=True)
class AttemptRef:
    """What a backend needs to know about one attempt."""

    task_id: str
    attempt_id: int
    number: int
    external_name: str
    external_ref: str
    spec: dict[str, Any]
    runner_credential: str = ""
    stop_requested: bool = False


@dataclass(frozen=True)
class ExternalRef:
    ref: str
    adopted: bool = False


@dataclass(frozen=True)
class Observation:
    """What the cloud shows for one attempt. `phase` is the backend's best word for it.

    For backends without a Runner this is the truth about the program: `failed` with
    `timed_out=True` ends the task TIMED_OUT, `gone` (the object vanished) makes it
    UNKNOWN, and `reason` is shown to users, so it must be words (e.g. "OOMKilled: the
    container ran out of memory"), not codes alone.
    """

    external_name: str
    exists: bool
    phase: Literal["pending", "running", "succeeded", "failed", "gone", "unknown"]
    exit_code: int | None = None
    reason: str = ""
    timed_out: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LogPiece:
    stream: Literal["stdout", "stderr"]
    data: bytes


@dataclass(frozen=True)
class Health:
    ok: bool
    message: str


class ExecutionBackend(Protocol):
    connection: CloudConnection
    # True when a Runner reports the program's life (local, OpenStack); False when the cloud itself does (Kubernetes).
    uses_runner: bool

    def validate(self, spec: dict[str, Any]) -> list[dict[str, str]]:
        """Field errors for what this cloud cannot run; empty when the spec is fine."""

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        """Idempotent: adopt the object named `attempt.external_name` or create it."""

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        """One batched read per connection."""

    def stop(self, attempt: AttemptRef) -> None:
        """Idempotent: make sure the execution no longer runs."""

    def cleanup(self, attempt: AttemptRef) -> bool:
        """Idempotent: remove what the attempt left behind; True when nothing is left."""

    def fetch_logs(self, attempt: AttemptRef, cursor: dict[str, Any]) -> tuple[list[LogPiece], dict[str, Any]]:
        """Log bytes the cloud holds past `cursor` (backend-defined, JSON), and the new cursor.

        Only for backends without a Runner; each byte must be returned once across calls.
        """

    def health(self) -> Health: ...

    # Optional (read-only views of the cloud); a backend without them raises BackendError(kind="not_found").
    inventory_kinds: tuple[str, ...]

    def inventory(self, kind: str) -> list[dict[str, Any]]:
        """Plain dicts describing the cloud's objects of one kind (e.g. nodes); not_found for an unknown kind."""

    def metrics(self) -> dict[str, Any]:
        """Current usage figures of the cloud ({"nodes": [...], "pods": [...]}); not_found when it serves none."""
