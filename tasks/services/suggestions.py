"""Why an attempt failed, as a class, and the change to retry it with.

The class is read from what the attempt already records in words (its failure reason, start error,
the cloud's last word, the stop reason): the backends word each known failure the same way
(clusters/backends/*/observation.py, cloudpivot.exceptions' cloud error table). A suggestion is
{failure_class, field, current, suggested, why}; `field` is None where no spec change can help
(the flavor is the connection's, a full quota frees by itself) and the words say what to do.
"""

from __future__ import annotations

from typing import Any

from tasks.choices import AttemptState, StopReason
from tasks.models import Attempt
from tasks.specs import MAX_TIMEOUT_SECONDS

MEMORY_MAX_MB = 16 * 1024 * 1024
MEMORY_WHEN_UNSAID_MB = 1024
TIMEOUT_WHEN_UNSAID = 3600
IMAGE_PULL_WORDS = ("cannot be pulled", "errimagepull", "imagepullbackoff", "invalidimagename", "image not found")

FAILURE_CLASSES = {
    "oom_killed": "out of memory (OOMKilled)",
    "deadline": "ran past its time limit",
    "image_pull": "image could not be pulled",
    "no_valid_host": "no host with room (NoValidHost)",
    "quota": "cloud quota exceeded",
    "exit_code": "the program failed",
    "lost": "lost (the cloud or Runner went silent)",
    "interrupted": "interrupted by the infrastructure (evicted, preempted, its host lost or rebooted)",
    "cancelled": "cancelled",
}


def failure_class(attempt: Attempt) -> str:
    """One of FAILURE_CLASSES, or "" for an attempt that succeeded or has not ended."""
    words = " ".join((attempt.failure_reason, attempt.start_error, attempt.observed_reason)).lower()
    if "oomkilled" in words:
        return "oom_killed"
    if attempt.stop_reason == StopReason.TIMEOUT or "deadlineexceeded" in words:
        return "deadline"
    if any(marker in words for marker in IMAGE_PULL_WORDS):
        return "image_pull"
    if "no valid host" in words:
        return "no_valid_host"
    if "quota" in words:
        return "quota"
    if attempt.stop_reason == StopReason.CANCEL:
        return "cancelled"
    if attempt.state == AttemptState.LOST:
        return "lost"
    if attempt.state == AttemptState.INTERRUPTED:
        return "interrupted"
    if (attempt.exit_code not in (None, 0)) or attempt.exit_signal or attempt.failure_reason:
        return "exit_code"
    return ""


def suggestion_for(attempt: Attempt, spec: dict[str, Any]) -> dict[str, Any] | None:
    """The change to retry `attempt` with, given the spec it ran; None for a class no change helps."""
    kind = failure_class(attempt)
    build = _SUGGESTIONS.get(kind)
    return {"failure_class": kind, **build(attempt, spec)} if build else None


def _more_memory(attempt: Attempt, spec: dict[str, Any]) -> dict[str, Any]:
    current = (spec.get("resources") or {}).get("memory_mb")
    suggested = min(MEMORY_MAX_MB, _round_up(current * 2, 64)) if current else MEMORY_WHEN_UNSAID_MB
    had = f"its {current} MB" if current else "the cloud's default memory limit"
    return {
        "field": "resources.memory_mb",
        "current": current,
        "suggested": suggested,
        "why": f"the program ran out of memory with {had}; retry with {suggested} MB",
    }


def _longer_timeout(attempt: Attempt, spec: dict[str, Any]) -> dict[str, Any]:
    current = spec.get("timeout_seconds")
    suggested = min(MAX_TIMEOUT_SECONDS, current * 2) if current else TIMEOUT_WHEN_UNSAID
    return {
        "field": "timeout_seconds",
        "current": current,
        "suggested": suggested,
        "why": f"the program was stopped at its time limit of {current or 'the cloud default'} s; "
        f"retry with {suggested} s",
    }


def _check_image(attempt: Attempt, spec: dict[str, Any]) -> dict[str, Any]:
    image = spec.get("image")
    return {
        "field": "image",
        "current": image,
        "suggested": image,
        "why": f"the image {image} could not be pulled: check its name and tag (and that the cloud may read "
        "its registry), correct it here, then retry",
    }


def _smaller_flavor(attempt: Attempt, spec: dict[str, Any]) -> dict[str, Any]:
    size = spec.get("resources") or {}
    return {
        "field": None,
        "current": None,
        "suggested": None,
        "why": f"no compute host had room for the cloud's flavor ({size.get('cpu', '?')} vCPU, "
        f"{size.get('memory_mb', '?')} MB): ask the cloud's admin for a smaller flavor, or submit to a cloud "
        "with one; retrying as it is may work once hosts free up",
    }


def _quota(attempt: Attempt, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "field": None,
        "current": None,
        "suggested": None,
        "why": "the cloud's own quota was full when the attempt started: retry as it is once other work "
        "ends, or ask for a larger quota",
    }


def _round_up(value: float, step: int) -> int:
    return int(-(-int(value) // step) * step)


_SUGGESTIONS = {
    "oom_killed": _more_memory,
    "deadline": _longer_timeout,
    "image_pull": _check_image,
    "no_valid_host": _smaller_flavor,
    "quota": _quota,
}
