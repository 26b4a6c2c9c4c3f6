"""A signed provenance bundle per attempt (docs/data.md, "Provenance"): what ran, where, on what, and what it left.

Built on demand from the rows that already exist (the task, its attempt, the attempt's events and its output
manifest): nothing is stored. The document is `{"bundle": {...}, "signature": {...}}`; the signature is a
detached Ed25519 signature over the canonical JSON bytes of `bundle` (keys sorted, no spaces, UTF-8), made
with the installation's key (results/provenance_key.py), so anyone with the public key can verify it without
CloudPivot.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.utils import timezone

from cloudpivot.exceptions import Conflict, NotFound
from cloudpivot.idempotency import canonical_sha256
from results.models import OutputManifest
from results.provenance_key import public_key, sign
from tasks.models import Attempt, Task
from tasks.selectors import task_get_for_user

FORMAT = "cloudpivot-provenance/1"
CANONICAL = "JSON, keys sorted, separators (',', ':'), not ASCII-escaped, UTF-8"


class NotFinished(Conflict):
    code = "not_finished"


def canonical_bytes(document: Any) -> bytes:
    """The bytes the signature covers (and the submitted document's SHA-256 is taken over)."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def task_provenance(*, user: AbstractBaseUser, task_id: Any, attempt_number: int | None = None) -> dict[str, Any]:
    """The signed bundle of the task's attempt (default: its latest). A foreign task is NotFound; an attempt
    that has not ended is a Conflict (`not_finished`): a bundle describes what ran, once it is over."""
    task = task_get_for_user(user=user, task_id=task_id)
    attempts = task.attempts.order_by("-number")
    attempt = (attempts.filter(number=attempt_number) if attempt_number else attempts).first()
    if attempt is None:
        raise NotFound(f"the task has no attempt {attempt_number}" if attempt_number else "the task has no attempt yet")
    if not attempt.is_closed:
        raise NotFinished(f"attempt {attempt.number} has not ended yet: its provenance is signed once it has")
    return provenance_signed(provenance_bundle(task, attempt))


def provenance_signed(bundle: dict[str, Any]) -> dict[str, Any]:
    key = public_key()
    return {
        "bundle": bundle,
        "signature": {"alg": "Ed25519", "key_id": key.key_id, "value": sign(canonical_bytes(bundle))},
    }


def provenance_bundle(task: Task, attempt: Attempt) -> dict[str, Any]:
    """The bundle's body: plain JSON values only (times as ISO 8601 text), so its canonical bytes are stable."""
    spec = task.normalized or {}
    events = _attempt_events(task, attempt)
    return {
        "format": FORMAT,
        "issued_at": _time(timezone.now()),
        "installation": {"id": settings.INSTALLATION_ID, "url": settings.CLOUDPIVOT_SITE_URL},
        "task": {
            "id": str(task.pk),
            "name": task.name,
            "project": task.project.slug,
            "cloud": task.connection.cloud_id,
            "backend": task.backend,
            "submitted_at": _time(task.created_at),
        },
        "document": {"sha256": canonical_sha256(task.spec), "canonical": CANONICAL},
        "spec": spec,
        "attempt": {
            "number": attempt.number,
            "name": attempt.external_name,
            "state": attempt.state,
            "started_at": _time(attempt.program_started_at),
            "ended_at": _time(attempt.finished_at or attempt.closed_at),
            "exit_code": attempt.exit_code,
            "exit_signal": attempt.exit_signal,
            "failure_reason": attempt.failure_reason,
        },
        "image": _image(task, spec, events),
        "execution": _execution(task, attempt, events),
        "inputs": _inputs(spec),
        "outputs": _outputs(attempt),
    }


def _time(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def _attempt_events(task: Task, attempt: Attempt) -> list[dict[str, Any]]:
    """The data of the task's events about this attempt (state changes and the cloud's observations)."""
    rows = task.events.filter(type__in=("state", "observed")).order_by("seq").values_list("data", flat=True)
    return [data for data in rows if isinstance(data, dict) and data.get("attempt") == attempt.number]


def _image(task: Task, spec: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """The image asked for and the digest that ran, where the cloud told us; null with the reason where not."""
    reference = spec.get("image")
    if task.backend == "local":
        return {"reference": None, "digest": None, "reason": "the local cloud runs programs on the host, no image"}
    if task.backend == "kubernetes":
        digest = next((data["image_id"] for data in reversed(events) if data.get("image_id")), None)
        reason = "" if digest else "the pod's imageID was not observed (the pod was gone before it was seen)"
        return {"reference": reference, "digest": digest, "source": "the pod's imageID", "reason": reason}
    if task.backend == "openstack":  # pinned at submission with the image's id, which is what booted
        digest = spec.get("image_digest")
        reason = "" if digest else "Glance gave no checksum for the image when the task was submitted"
        return {
            "reference": reference,
            "image_id": spec.get("image_id"),
            "digest": digest,
            "source": "Glance's hash of the image (os_hash_algo:os_hash_value, else md5:checksum)",
            "reason": reason,
        }
    return {"reference": reference, "digest": None, "reason": f"the {task.backend} cloud does not report it"}


def _execution(task: Task, attempt: Attempt, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The Runner (host agent) and its host's facts, as the agent reported them when the program started."""
    host = next((data["host"] for data in events if isinstance(data.get("host"), dict)), None)
    node = next((data["node"] for data in reversed(events) if data.get("node")), None)
    if host:
        return {
            "runner": {"name": "cloudpivot-agent", "version": host.get("agent_version") or None},
            "host": {
                "kernel": host.get("kernel") or None,
                "cpu_model": host.get("cpu_model") or None,
                "boot_id": host.get("boot_id") or attempt.runner_boot_id or None,
            },
            "node": node,
        }
    if task.backend == "kubernetes":
        reason = "Kubernetes runs the container without a CloudPivot Runner; the node is the pod's"
    else:
        reason = "the host agent did not report its host's facts (an agent older than this server's)"
    return {
        "runner": None,
        "host": {"kernel": None, "cpu_model": None, "boot_id": attempt.runner_boot_id or None},
        "node": node,
        "reason": reason,
    }


def _inputs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """What the task referenced (volumes, data), as recorded; a checksum where the store has one, else null."""
    found = []
    for kind in ("volumes", "data"):
        for entry in spec.get(kind) or []:
            if isinstance(entry, dict):
                found.append({"kind": kind, **entry, "sha256": entry.get("sha256")})
    return found


def _outputs(attempt: Attempt) -> dict[str, Any]:
    manifest = OutputManifest.objects.filter(attempt=attempt).first()
    if manifest is None:
        return {"state": "none", "reason": "no outputs were reported for this attempt", "files": []}
    files = [
        {"name": row.name, "state": row.state, "bytes": row.bytes, "sha256": row.sha256 or None, "reason": row.reason}
        for row in attempt.output_files.order_by("name")
    ]
    return {"state": manifest.state, "reason": manifest.reason, "store": manifest.store, "files": files}
