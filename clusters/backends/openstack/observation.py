"""What a task's server says about the attempt: evidence only (the Runner's reports are the truth).

Plain functions over SDK server objects listed once per pass; a server in ERROR costs one GET for its
fault (Nova leaves it out of lists), asked through `fault_of`. A server whose compute host Nova reports DOWN
was interrupted (the infrastructure ended it, not the program): the task's `on_interrupt` decides.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from clusters.backends.base import AttemptRef, Observation

GONE_STATUSES = {"SHUTOFF", "DELETED", "SOFT_DELETED", "SHELVED", "SHELVED_OFFLOADED"}


def survivor(servers: list[Any]) -> Any:
    """Of several servers with the attempt's name, the one that counts: the oldest."""
    return min(servers, key=lambda s: (s.created_at or "", s.id))


def server_observation(
    attempt: AttemptRef,
    servers: list[Any],
    now: dt.datetime,
    *,
    boot_deadline_seconds: float,
    fault_of: Callable[[str], dict[str, Any]],
) -> Observation:
    name = attempt.external_name
    server = next((s for s in servers if s.id == attempt.external_ref), None) or (
        survivor(servers) if servers else None
    )
    if server is None:
        return Observation(
            name,
            exists=False,
            phase="gone",
            reason=f"server {name} ({attempt.external_ref or 'no id recorded'}) is no longer in the project: "
            "it was deleted outside CloudPivot",
            evidence={"server_id": attempt.external_ref, "server_status": "absent"},
        )
    evidence: dict[str, Any] = {
        "server_id": server.id,
        "server_status": server.status,
        "task_state": server.task_state,
        "power_state": server.power_state,
    }
    status = server.status
    if server.host_status:  # shown where policy allows (admin by default), from microversion 2.16
        evidence["host_status"] = server.host_status
    if server.host_status == "DOWN" and status != "BUILD":
        return Observation(
            name,
            exists=True,
            phase="failed",
            interrupted=True,
            reason=f"the server's compute host is down (Nova: host_status DOWN, server {status}): its program "
            "ended with the host",
            evidence=evidence,
        )
    created = parse_time(server.created_at)
    if created:
        evidence["booting_for"] = round((now - created).total_seconds(), 1)
    if status == "BUILD":
        # A build Nova never finishes (a lost RPC, a dead compute service) ends at the boot deadline too.
        if created:
            evidence["boot_deadline_passed"] = (now - created).total_seconds() > float(boot_deadline_seconds)
        return Observation(name, exists=True, phase="pending", reason="the server is being built", evidence=evidence)
    if status == "ACTIVE":
        launched = parse_time(server.launched_at)
        if launched:
            evidence["active_since"] = launched.isoformat()
            evidence["boot_deadline_passed"] = (now - launched).total_seconds() > float(boot_deadline_seconds)
        return Observation(
            name,
            exists=True,
            phase="pending",
            reason="the server is ACTIVE; only the Runner's events say whether the program runs",
            evidence=evidence,
        )
    if status == "ERROR":
        fault = server.fault or fault_of(server.id)
        message = fault.get("message") or "Nova gave no fault message"
        evidence["fault"] = message
        if fault.get("code"):
            evidence["fault_code"] = fault["code"]
        return Observation(
            name, exists=True, phase="failed", reason=f"the server went to ERROR: {message}", evidence=evidence
        )
    if status in GONE_STATUSES:
        words = "shut off" if status == "SHUTOFF" else status.lower().replace("_", " ")
        why = "as CloudPivot asked" if attempt.stop_requested and status == "SHUTOFF" else "outside CloudPivot"
        return Observation(name, exists=True, phase="gone", reason=f"the server was {words} {why}", evidence=evidence)
    return Observation(
        name,
        exists=True,
        phase="unknown",
        reason=f"the server is {status}{f' ({server.task_state})' if server.task_state else ''}",
        evidence=evidence,
    )


def parse_time(value: Any) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
