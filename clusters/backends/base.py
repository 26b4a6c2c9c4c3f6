"""The interface every cloud backend implements, and the plain data that crosses it.

Backends never touch Task state or the ORM: services hand them plain data and record
what they answer (DESIGN §4). Optional abilities (inventory, metrics, the check_cloud tables, the
"Runner never reported" verdict, VM instances) are declared here with a default that says "not offered",
so callers ask the backend instead of probing it with hasattr.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from cloudpivot.exceptions import BackendError, ErrorKind
from clusters.models import CloudConnection

# The cloud errors are declared with their API mapping (cloudpivot.exceptions.cloud_error); backends import them here.
__all__ = [
    "AttemptRef",
    "BackendError",
    "ErrorKind",
    "ExecutionBackend",
    "ExternalRef",
    "FitLimit",
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
    # A one-time secret the service issued for a Runner's first call (OpenStack user data); "" when none.
    bootstrap_secret: str = ""
    # The task's project secrets, name → value, for a backend without a Runner to deliver at start (the
    # Runner gets them in its assignment). Filled only for ensure_started; never logged (repr=False).
    secrets: dict[str, str] = field(default_factory=dict, repr=False)


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
    # The infrastructure ended it (evicted, preempted, its node lost), not the program: `on_interrupt` decides.
    interrupted: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LogPiece:
    stream: Literal["stdout", "stderr"]
    data: bytes


@dataclass(frozen=True)
class Health:
    ok: bool
    message: str


@dataclass(frozen=True)
class FitLimit:
    """One limit a request meets ("Will it fit?", clusters/fit.py): how much it asks, how much is free now
    (None: the limit does not change with use, like a node's size) and the most there is (None: no ceiling)."""

    resource: str  # cpu (cores), memory_mb, gpu, disk_gb, tasks, instances, pods, jobs, active_tasks
    requested: float
    available: float | None
    limit: float | None
    source: str  # "project quota on k3s-lab", "ResourceQuota tasks/compute", "node allocatable", "OpenStack quota" …

    @property
    def never(self) -> bool:
        return self.limit is not None and self.requested > self.limit

    @property
    def not_now(self) -> bool:
        return self.available is not None and self.requested > self.available


# Node metric names shared by every backend's figures (missing where the cloud does not say).
CPU_USED = "cpu_used_cores"
CPU_CAPACITY = "cpu_capacity_cores"
CPU_ALLOCATABLE = "cpu_allocatable_cores"
MEMORY_USED = "memory_used_bytes"
MEMORY_CAPACITY = "memory_capacity_bytes"
MEMORY_ALLOCATABLE = "memory_allocatable_bytes"


@dataclass
class CloudFigures:
    """Figures a cloud reports about itself, for the metrics sampler. What it does not serve is a note."""

    nodes: dict[str, dict[str, float]] = field(default_factory=dict)  # node name → metric → value
    instances: dict[str, dict[str, float]] = field(default_factory=dict)  # server/VM id → metric → value
    connection: dict[str, float] = field(default_factory=dict)  # connection-wide (the cloud's own quota use)
    notes: list[str] = field(default_factory=list)  # what the cloud does not serve: skipped, not an error


# What every backend runs: the environment, working directory, labels, project secrets, timeout and retries.
TASK_FIELDS_EVERYWHERE = frozenset({"env", "workdir", "labels", "secrets", "timeout_seconds", "retry_limit"})


class ExecutionBackend:
    """The base of every backend: the required calls, and the optional ones with their "not offered" default."""

    connection: CloudConnection
    # True when a Runner reports the program's life (local, OpenStack); False when the cloud itself does (Kubernetes).
    uses_runner: bool = False
    # How an attempt reaches its execution: True when the connection's host agent takes it in a sync (local:
    # admitted and handed out there), False when the reconcile pass starts it in the cloud (ensure_started).
    hands_out: bool = False
    # What this cloud can close of a task's outbound network (clusters/egress.py): "none" (all of it), "list"
    # (all but the destinations named). A task or policy asking for more is refused at submission.
    egress_closes: frozenset[str] = frozenset()
    # The kinds of data reference (`data`, clusters/data_refs.py) this cloud mounts; any other is refused at
    # submission naming `data.N.kind`.
    data_kinds: frozenset[str] = frozenset()
    # The kinds `inventory` answers for (empty: no inventory).
    inventory_kinds: tuple[str, ...] = ()
    # True when ensure_started needs `AttemptRef.bootstrap_secret` (a VM's Runner bootstraps with it).
    needs_bootstrap_secret: bool = False
    # The task-document fields this backend runs besides cloud, project, name and command (resources by their
    # own names: cpu, memory_mb, gpu). The submit form shows only these; validate() refuses the others in words.
    task_fields: frozenset[str] = TASK_FIELDS_EVERYWHERE
    # Where the submit form's image choices come from: "" (no image), "recent" (typed, the user's recent
    # images offered) or "inventory" (picked from the cloud's `images` inventory).
    image_choices: str = ""

    def validate(self, spec: dict[str, Any]) -> list[dict[str, str]]:
        """Field errors for what this cloud cannot run; empty when the spec is fine."""
        raise NotImplementedError

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        """Idempotent: adopt the object named `attempt.external_name` or create it."""
        raise NotImplementedError

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        """One batched read per connection."""
        raise NotImplementedError

    def stop(self, attempt: AttemptRef) -> None:
        """Idempotent: make sure the execution no longer runs."""
        raise NotImplementedError

    def cleanup(self, attempt: AttemptRef) -> bool:
        """Idempotent: remove what the attempt left behind; True when nothing is left."""
        raise NotImplementedError

    def fetch_logs(self, attempt: AttemptRef, cursor: dict[str, Any]) -> tuple[list[LogPiece], dict[str, Any]]:
        """Log bytes the cloud holds past `cursor` (backend-defined, JSON), and the new cursor.

        Only for backends without a Runner; each byte must be returned once across calls.
        """
        raise NotImplementedError

    def health(self) -> Health:
        raise NotImplementedError

    # ------------------------------------------------------------------ optional, with their defaults
    def output_store(self) -> Any | None:
        """The object store this cloud keeps task outputs in, or None (docs/data.md: results/stores.py).

        One has `kind`, `upload_target(prefix, seconds)` (what an execution writes to, signed for it alone),
        `download_url(name, seconds, filename=)` (a person's temporary link) and `delete_prefix(prefix)`."""
        return None

    def stage_in(self, spec: dict[str, Any], seconds: int) -> list[dict[str, Any]]:
        """What the host program fetches before the program starts (`object` data), for the assignment; only
        clouds whose `data_kinds` has `object` are asked (docs/data.md)."""
        return []

    def task_resources(self, spec: dict[str, Any]) -> dict[str, Any]:
        """What the task will hold on this cloud ({cpu, memory_mb, gpu}): its quota footprint, fixed at submission.

        By default what it asked; a cloud that gives more (a connection's default requests, a VM's flavor) says so.
        """
        return dict(spec.get("resources") or {})

    def data_resolved(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """The task's data references as they are kept (after validate(): a host path with its symlinks resolved)."""
        return [dict(ref) for ref in spec.get("data") or []]

    def task_defaults(self) -> dict[str, Any]:
        """What a task that leaves a field empty gets on this cloud ({"image", "cpu", "memory_mb"} as set), from
        the connection's options alone (the submit form's help texts; no call to the cloud)."""
        return {}

    def learned_facts(self) -> dict[str, Any]:
        """What calls so far learned about the cloud that the connection should keep (`CloudConnection.facts`,
        e.g. a flavor's size), for the caller to store: backends never write the database."""
        return {}

    def access_errors(self, spec: dict[str, Any], *, project_id: int, project: str) -> list[dict[str, str]]:
        """Field errors for the cloud objects the task names that its project may not use (another project's
        image or volume); empty when it may. Asked at submission, after validate(); may ask the cloud."""
        return []

    def inventory(self, kind: str) -> list[dict[str, Any]]:
        """Plain dicts describing the cloud's objects of one kind (e.g. nodes); not_found for an unknown kind."""
        raise BackendError(f"no inventory for the {self.connection.cloud_id} cloud", kind="not_found")

    def metrics(self) -> dict[str, Any]:
        """Current usage figures of the cloud ({"nodes": [...], "pods": [...]}); not_found when it serves none."""
        raise BackendError(f"no metrics for the {self.connection.cloud_id} cloud", kind="not_found")

    def requirements(self) -> list[dict[str, Any]] | None:
        """check_cloud's table, each thing checked ({what, ok, required, detail}); None: health() says it all."""
        return None

    def permissions(self) -> list[dict[str, Any]] | None:
        """check_cloud's permission table (after a good health()); None when the cloud has none to ask about."""
        return None

    def runner_never_reported(
        self, attempt: AttemptRef, observation: Observation, *, runner_contact_at: Any
    ) -> dict[str, Any] | None:
        """For a Runner backend: {"reason", "console_tail"} when its machine is up but the Runner never called."""
        return None

    def runner_boot_wait(self, attempt: AttemptRef, observation: Observation, *, runner_contact_at: Any) -> str | None:
        """For a Runner backend whose machine boots first: the words for "still booting, the Runner is not due
        yet" (the task stays STARTING, the heartbeat deadline does not apply), else None."""
        return None

    def vm_instances(self) -> tuple[bool, str]:
        """Whether this cloud offers persistent VM instances (resources app), and in what words."""
        return False, f"VM instances are not available on the {self.connection.backend} backend"

    def vm_snapshots(self) -> tuple[bool | None, str]:
        """Whether snapshots and restores of VM instances work here (None: cannot tell), and in what words."""
        available, message = self.vm_instances()
        return (True, "snapshots of VM instances") if available else (False, message)

    def fit_limits(self, asked: dict[str, Any]) -> tuple[list[FitLimit], list[str]]:
        """The cloud's own limits on one request ("Will it fit?"): `asked` holds cpu, memory_mb, gpu (a task's
        resources) and, for an instance, instances, disk_gb and flavor. Returns the limits read and notes for
        those that could not be read (words). Only reads; by default the cloud says nothing."""
        return [], []

    def feature_checks(self) -> list[dict[str, Any]]:
        """check_cloud's optional lines beside the permissions ({what, ok, required, detail}); [] for none."""
        return []
