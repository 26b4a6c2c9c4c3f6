"""What a Job and its newest pod say about the program: the table in docs/backends/kubernetes.md, as code.

Plain functions over the API's JSON; the backend reads Jobs and pods once per pass and hands them here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from clusters.backends.base import AttemptRef, Observation
from clusters.backends.kubernetes.labels import CONTAINER

IMAGE_PULL_ERRORS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}
CONFIG_ERRORS = {"CreateContainerConfigError", "CreateContainerError"}


@dataclass(frozen=True)
class PodView:
    """What observe learned about an attempt's pod, for fetch_logs in the same pass."""

    name: str
    started: bool  # the container has started, so it has a log
    finished: bool  # the pod will write no more


def newest_pod(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    return max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "") if pods else None


def observe_attempt(
    attempt: AttemptRef,
    job: dict[str, Any] | None,
    pod: dict[str, Any] | None,
    now: dt.datetime,
    *,
    namespace: str,
    image_pull_grace: float,
) -> Observation:
    """Map a Job and its newest pod to what happened to the program (see the table in the docs)."""
    name = attempt.external_name
    if job is None:
        return Observation(
            name,
            exists=False,
            phase="gone",
            reason=f"the Job {name} no longer exists in namespace {namespace}",
            evidence={"pod": pod["metadata"]["name"] if pod else None},
        )
    uid = job["metadata"].get("uid", "")
    if attempt.external_ref and uid and uid != attempt.external_ref:
        return Observation(
            name,
            exists=False,
            phase="gone",
            reason=f"the Job {name} was deleted and replaced by another object of the same name",
            evidence={"uid": uid, "expected_uid": attempt.external_ref},
        )
    job_status = job.get("status") or {}
    conditions = {c.get("type"): c for c in job_status.get("conditions") or [] if str(c.get("status")) == "True"}
    failed = conditions.get("Failed") or conditions.get("FailureTarget")
    evidence: dict[str, Any] = {"job": name}
    if pod is not None:
        evidence |= {"pod": pod["metadata"]["name"], "node": (pod.get("spec") or {}).get("nodeName")}
        if image_id := container_status(pod).get("imageID"):  # the digest that ran (the provenance bundle)
            evidence["image_id"] = image_id
        scheduled_at = _scheduled_at(pod, now)
        if scheduled_at:
            evidence["scheduled_at"] = scheduled_at
    terminated = _container_state(pod, "terminated") if pod else None
    exit_code = terminated.get("exitCode") if terminated else None
    if failed and failed.get("reason") == "DeadlineExceeded":
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        return Observation(
            name,
            exists=True,
            phase="failed",
            exit_code=exit_code,
            timed_out=True,
            reason=f"the Job ran past its deadline of {deadline} s and Kubernetes stopped it (DeadlineExceeded)",
            evidence=evidence,
        )
    pod_status = (pod or {}).get("status") or {}
    if pod is not None and pod_status.get("reason") == "Evicted":
        return Observation(
            name,
            exists=True,
            phase="failed",
            exit_code=exit_code,
            reason=f"Evicted: the node evicted the pod ({pod_status.get('message') or 'no reason given'})",
            interrupted=True,
            evidence=evidence,
        )
    disruption = _disruption(pod_status)
    if disruption and (terminated or pod_status.get("phase") == "Failed"):
        return Observation(
            name,
            exists=True,
            phase="failed",
            exit_code=exit_code,
            reason=disruption,
            interrupted=True,
            evidence=evidence,
        )
    if terminated:
        return _terminated_observation(name, terminated, pod, evidence)
    if conditions.get("Complete") or conditions.get("SuccessCriteriaMet"):
        return Observation(
            name, exists=True, phase="succeeded", exit_code=0, reason="the Job completed", evidence=evidence
        )
    job_verdict = f"{failed.get('reason') or 'no reason'}: {failed.get('message') or ''}" if failed else ""
    if pod is None:
        if failed or job_status.get("active") or job_status.get("failed") or job_status.get("succeeded"):
            # The pod is gone without a word on how the program ended: unknown, not failed (DESIGN §3).
            return Observation(
                name,
                exists=True,
                phase="gone",
                reason=f"the pod of Job {name} vanished before it finished (deleted, or its node was lost)",
                evidence=evidence | ({"job_failed": job_verdict.rstrip(": ")} if failed else {}),
            )
        return Observation(
            name, exists=True, phase="pending", reason="waiting for Kubernetes to create the pod", evidence=evidence
        )
    if failed:
        return Observation(
            name,
            exists=True,
            phase="failed",
            reason=f"the Job failed ({job_verdict.rstrip(': ')})",
            evidence=evidence,
        )
    return _pod_observation(name, pod, now, evidence, image_pull_grace)


def _pod_observation(
    name: str, pod: dict[str, Any], now: dt.datetime, evidence: dict[str, Any], image_pull_grace: float
) -> Observation:
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    if phase == "Running" and _container_state(pod, "running") is not None:
        node = (pod.get("spec") or {}).get("nodeName")
        where = f" on node {node}" if node else ""
        return Observation(
            name, exists=True, phase="running", reason=f"the program is running{where}", evidence=evidence
        )
    if phase == "Succeeded":
        return Observation(
            name, exists=True, phase="succeeded", exit_code=0, reason="the pod succeeded", evidence=evidence
        )
    if phase == "Failed":
        return Observation(
            name,
            exists=True,
            phase="failed",
            reason=f"the pod failed ({status.get('reason') or 'no reason'}): {status.get('message') or ''}".rstrip(
                ": "
            ),
            evidence=evidence,
        )
    if phase == "Unknown":
        return Observation(
            name,
            exists=True,
            phase="unknown",
            reason="Kubernetes lost contact with the pod's node; its state is unknown",
            evidence=evidence,
        )
    waiting = _container_state(pod, "waiting") or {}
    reason = waiting.get("reason") or ""
    if reason in IMAGE_PULL_ERRORS or reason in CONFIG_ERRORS:
        grace = image_pull_grace
        age = (now - _parse_time(pod["metadata"].get("creationTimestamp"), now)).total_seconds()
        image = _container_image(pod)
        if reason in IMAGE_PULL_ERRORS:
            words = f"the image {image} cannot be pulled ({reason}: {waiting.get('message') or 'no details'})"
        else:
            words = f"the container cannot be created ({reason}: {waiting.get('message') or 'no details'})"
        if reason == "InvalidImageName" or age >= grace:
            return Observation(name, exists=True, phase="failed", reason=words, evidence=evidence | {"waiting": reason})
        return Observation(
            name,
            exists=True,
            phase="pending",
            reason=f"{words}; Kubernetes keeps trying for {int(grace)} s after the pod was created",
            evidence=evidence | {"waiting": reason},
        )
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and str(condition.get("status")) == "False":
            detail = condition.get("message") or condition.get("reason") or "no node fits"
            return Observation(
                name, exists=True, phase="pending", reason=f"waiting for a node: {detail}", evidence=evidence
            )
    what = f" ({reason})" if reason else ""
    return Observation(name, exists=True, phase="pending", reason=f"the pod is starting{what}", evidence=evidence)


def _scheduled_at(pod: dict[str, Any], now: dt.datetime) -> str:
    """When the scheduler placed the pod (PodScheduled True), for the attempt's phase list; the time of this
    observation when the condition carries no lastTransitionTime."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and str(condition.get("status")) == "True":
            return condition.get("lastTransitionTime") or now.isoformat()
    return ""


def container_status(pod: dict[str, Any]) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return status
    return {}


def _container_state(pod: dict[str, Any] | None, which: str) -> dict[str, Any] | None:
    if not pod:
        return None
    state = (container_status(pod).get("state") or {}).get(which)
    return state if isinstance(state, dict) else None


def container_started(pod: dict[str, Any]) -> bool:
    return _container_state(pod, "running") is not None or _container_state(pod, "terminated") is not None


def _container_image(pod: dict[str, Any]) -> str:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == CONTAINER:
            return container.get("image") or "?"
    return "?"


def _memory_limit(pod: dict[str, Any] | None) -> str:
    for container in ((pod or {}).get("spec") or {}).get("containers") or []:
        if container.get("name") == CONTAINER:
            return ((container.get("resources") or {}).get("limits") or {}).get("memory") or ""
    return ""


def _terminated_observation(
    name: str, terminated: dict[str, Any], pod: dict[str, Any] | None, evidence: dict[str, Any]
) -> Observation:
    code = terminated.get("exitCode")
    reason = terminated.get("reason") or ""
    evidence = evidence | {"container_reason": reason}
    if reason == "OOMKilled":
        limit = _memory_limit(pod)
        within = f" of {limit}" if limit else ""
        return Observation(
            name,
            exists=True,
            phase="failed",
            exit_code=code,
            reason=f"OOMKilled: the container ran out of memory (limit{within}) and was killed",
            evidence=evidence,
        )
    if code == 0:
        return Observation(
            name,
            exists=True,
            phase="succeeded",
            exit_code=0,
            reason="the program exited with code 0",
            evidence=evidence,
        )
    words = f"the program exited with code {code}"
    if terminated.get("signal"):
        words += f" (signal {terminated['signal']})"
    elif code is not None and code > 128:
        words += f" (killed by signal {code - 128})"
    if reason and reason not in ("Error", "Completed"):
        words += f" ({reason}{': ' + terminated['message'] if terminated.get('message') else ''})"
    return Observation(name, exists=True, phase="failed", exit_code=code, reason=words, evidence=evidence)


def _parse_time(text: str | None, default: dt.datetime) -> dt.datetime:
    if not text:
        return default
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return default


def _disruption(pod_status: dict[str, Any]) -> str:
    """Why Kubernetes stopped the pod for its own reasons (the DisruptionTarget condition: preemption, an eviction
    by the API, a taint, the node's shutdown), in words; "" when it did not."""
    for condition in pod_status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and str(condition.get("status")) == "True":
            why = condition.get("reason") or "DisruptionTarget"
            return f"{why}: Kubernetes stopped the pod ({condition.get('message') or 'no message given'})"
    return ""
