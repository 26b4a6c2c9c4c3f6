"""The `batch/v1` Job of an attempt: literal argv, no retries by Kubernetes, CloudPivot's labels.

Connection `options` give every Job its defaults: `node_selector`, `tolerations`, `image_pull_secrets`,
`service_account`, `ttl_seconds_after_finished`, and `default_resources` for a task that names none.
"""

from __future__ import annotations

import math
from typing import Any

from clusters.backends.base import AttemptRef
from clusters.backends.kubernetes.hold import with_debug_hold
from clusters.backends.kubernetes.labels import CONTAINER, LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, label_value
from clusters.backends.kubernetes.task_secrets import secret_env, secret_mounts
from clusters.data_refs import data_env, pvc_volumes


def job_manifest(attempt: AttemptRef, *, namespace: str, installation: str, options: dict[str, Any]) -> dict:
    """The Job manifest for an attempt."""
    spec = attempt.spec
    labels = {
        LABEL_TASK: label_value(attempt.task_id),
        LABEL_ATTEMPT: attempt.external_name,
        LABEL_INSTALLATION: installation,
    }
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec["image"],
        "command": list(spec["command"]),
        "env": [{"name": key, "value": value} for key, value in ((spec.get("env") or {}) | data_env(spec)).items()]
        + secret_env(attempt),
        "resources": _resources(resources_with_defaults(spec.get("resources") or {}, options)),
    }
    if spec.get("workdir"):
        container["workingDir"] = spec["workdir"]
    volumes = [volume for _field, volume in pvc_volumes(spec)]  # `volumes` and `data` of kind pvc, one path
    secret_volume_mounts, secret_volumes = secret_mounts(attempt)
    if volumes or secret_volumes:
        container["volumeMounts"] = [
            {"name": f"vol-{i}", "mountPath": v["mount_path"], "readOnly": bool(v.get("read_only"))}
            for i, v in enumerate(volumes)
        ] + secret_volume_mounts
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        # A task gets no API credentials unless the connection names a service account for it.
        "automountServiceAccountToken": bool(options.get("service_account")),
        # Nor the addresses of every Service in the namespace as environment variables (CloudPivot's own, when
        # tasks share its namespace): what a task may reach is the network policy's to say.
        "enableServiceLinks": False,
    }
    if spec.get("stop_grace_seconds") is not None:  # SIGTERM, then this long before SIGKILL (the kubelet's own)
        pod_spec["terminationGracePeriodSeconds"] = spec["stop_grace_seconds"]
    if options.get("service_account"):
        pod_spec["serviceAccountName"] = options["service_account"]
    if volumes or secret_volumes:
        pod_spec["volumes"] = [
            {
                "name": f"vol-{i}",
                "persistentVolumeClaim": {"claimName": v["claim"], "readOnly": bool(v.get("read_only"))},
            }
            for i, v in enumerate(volumes)
        ] + secret_volumes
    node_selector = dict(options.get("node_selector") or {}) | dict(spec.get("node_selector") or {})
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    tolerations = [_toleration(t) for t in list(options.get("tolerations") or []) + list(spec.get("tolerations") or [])]
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if options.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = [{"name": name} for name in options["image_pull_secrets"]]
    job_spec: dict[str, Any] = {
        "backoffLimit": 0,
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    }
    if spec.get("timeout_seconds"):
        job_spec["activeDeadlineSeconds"] = int(spec["timeout_seconds"])
    if options.get("ttl_seconds_after_finished") is not None:
        job_spec["ttlSecondsAfterFinished"] = int(options["ttl_seconds_after_finished"])
    with_debug_hold(spec, pod_spec, job_spec)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": attempt.external_name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {"cloudpivot.io/attempt-number": str(attempt.number)},
        },
        "spec": job_spec,
    }


def resources_with_defaults(resources: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """What the task asked, with the connection's `default_resources` for CPU and memory where it said nothing.

    Filled in at submission (so quotas count what the pod really holds) and again here for older tasks."""
    defaults = options.get("default_resources") or {}
    out = dict(resources)
    for key in ("cpu", "memory_mb"):
        if not out.get(key) and defaults.get(key):
            out[key] = defaults[key]
    out.setdefault("gpu", 0)
    return out


def _resources(resources: dict[str, Any]) -> dict[str, Any]:
    """requests = limits for CPU and memory (predictable batch runs); GPUs as nvidia.com/gpu limits."""
    amounts: dict[str, str] = {}
    if resources.get("cpu"):
        amounts["cpu"] = f"{int(math.ceil(float(resources['cpu']) * 1000))}m"
    if resources.get("memory_mb"):
        amounts["memory"] = f"{int(resources['memory_mb'])}Mi"
    out: dict[str, Any] = {}
    if amounts:
        out = {"requests": dict(amounts), "limits": dict(amounts)}
    if resources.get("gpu"):
        out.setdefault("limits", {})["nvidia.com/gpu"] = str(int(resources["gpu"]))
    return out


def _toleration(toleration: dict[str, Any]) -> dict[str, Any]:
    out = {"operator": toleration.get("operator") or "Equal"}
    for key in ("key", "value", "effect"):
        if toleration.get(key):
            out[key] = toleration[key]
    if toleration.get("toleration_seconds") is not None:
        out["tolerationSeconds"] = int(toleration["toleration_seconds"])
    return out
