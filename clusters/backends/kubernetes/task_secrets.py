"""An attempt's project secrets as a Kubernetes Secret, named like its Job and owned by it.

The Job refers to the Secret by name (env `secretKeyRef`, a `secret` volume for files: manifest.py), so
neither the manifest nor anything CloudPivot stores holds a value. The Secret is made before the Job,
given the Job as owner once the Job exists (the cluster's garbage collector removes it with the Job), and
deleted by the cleanup as well, so it does not outlive the attempt even when finished Jobs are kept.
"""

from __future__ import annotations

import base64
from typing import Any

from clusters.backends.base import AttemptRef, BackendError
from clusters.backends.kubernetes.client import KubeApiError, KubeClient
from clusters.backends.kubernetes.labels import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, label_value

VOLUME = "cp-secrets"


def secret_name(attempt: AttemptRef) -> str:
    return attempt.external_name


def _labels(attempt: AttemptRef, installation: str) -> dict[str, str]:
    return {
        LABEL_TASK: label_value(attempt.task_id),
        LABEL_ATTEMPT: attempt.external_name,
        LABEL_INSTALLATION: installation,
    }


def _data(attempt: AttemptRef) -> dict[str, str]:
    names = {ref["name"] for ref in attempt.spec.get("secrets") or []}
    return {name: base64.b64encode(value.encode()).decode() for name, value in attempt.secrets.items() if name in names}


def ensure_secret(client: KubeClient, attempt: AttemptRef, *, installation: str) -> None:
    """Create the attempt's Secret, or bring ours up to date (a retried start); another's of that name is refused."""
    name = secret_name(attempt)
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": client.namespace, "labels": _labels(attempt, installation)},
        "data": _data(attempt),
    }
    what = f"creating Secret {name}"
    try:
        client.call(what, client.core().create_namespaced_secret, client.namespace, body)
        return
    except KubeApiError as exc:
        if exc.status != 409:
            raise
    existing = client.call(f"reading Secret {name}", client.core().read_namespaced_secret, name, client.namespace)
    if (existing.get("metadata") or {}).get("labels") != body["metadata"]["labels"]:
        raise BackendError(
            f"a Secret named {name} already exists in namespace {client.namespace} but was not created by this "
            "CloudPivot installation for this attempt; it was left alone",
            kind="invalid_spec",
        )
    client.call(
        f"updating Secret {name}", client.core().patch_namespaced_secret, name, client.namespace, {"data": body["data"]}
    )


def own_secret(client: KubeClient, attempt: AttemptRef, job: dict[str, Any]) -> None:
    """Make the Job the Secret's owner, so deleting the Job (or its TTL) deletes the Secret too."""
    name = secret_name(attempt)
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"].get("uid", ""),
        "blockOwnerDeletion": False,
    }
    patch = {"metadata": {"ownerReferences": [owner]}}
    client.call(f"updating Secret {name}", client.core().patch_namespaced_secret, name, client.namespace, patch)


def delete_secret(client: KubeClient, attempt: AttemptRef) -> None:
    """Delete the attempt's Secret; already gone is success."""
    name = secret_name(attempt)
    try:
        client.call(f"deleting Secret {name}", client.core().delete_namespaced_secret, name, client.namespace)
    except KubeApiError as exc:
        if exc.status != 404:
            raise


def secret_env(attempt: AttemptRef) -> list[dict[str, Any]]:
    """The container's env entries for secrets delivered as variables: references to the Secret's keys."""
    return [
        {"name": ref["env"], "valueFrom": {"secretKeyRef": {"name": secret_name(attempt), "key": ref["name"]}}}
        for ref in attempt.spec.get("secrets") or []
        if ref.get("env")
    ]


def secret_mounts(attempt: AttemptRef) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volume mounts, volumes) for secrets delivered as files: one key of the Secret at each path."""
    files = [ref for ref in attempt.spec.get("secrets") or [] if ref.get("file")]
    if not files:
        return [], []
    mounts = [{"name": VOLUME, "mountPath": ref["file"], "subPath": ref["name"], "readOnly": True} for ref in files]
    # 0444 inside the task's own container: readable whatever user the image runs as (no fsGroup needed).
    volume = {"name": VOLUME, "secret": {"secretName": secret_name(attempt), "defaultMode": 0o444}}
    return mounts, [volume]
