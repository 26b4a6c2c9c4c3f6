"""The Kubernetes side: a realistic kmock API server on loopback (tests/clusters/kube_fixture.py), a token
file for it, connections to it (`kube_connection`, the lab one; `kube_connection_to` builds any other), and Job
manifests as CloudPivot labels them, Node manifests as a cluster reports them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from django.conf import settings

from clusters.backends.kubernetes import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, label_value
from clusters.models import CloudConnection
from tests.clusters.kube_cluster import KubeCluster

TOKEN = "test-token-7f3a"  # the bearer token the loopback API server expects from CloudPivot
# The options of a connection that runs tasks in a test: a minute's grace for an image pull, logs read every pass.
TASK_OPTIONS = {"image_pull_grace_seconds": 60, "log_interval_seconds": 0}


@pytest.fixture
def kube():
    """A fresh Kubernetes API server (kmock + realistic semantics) on 127.0.0.1 for one test."""
    cluster = KubeCluster()
    cluster.configure(token=TOKEN)
    yield cluster
    cluster.close()


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def kube_connection_to(
    endpoint: str,
    token_file: Path,
    *projects,
    cloud_id: str = "k3s-lab",
    scope: str = "tasks",
    options: dict | None = None,
    **fields,
) -> CloudConnection:
    """A Kubernetes connection `cloud_id` to the API server at `endpoint`, with the bearer token in `token_file`,
    granted to `projects`; `fields` are its other columns (name …). The options are copied: a test that changes
    its connection's options changes no other's."""
    connection = CloudConnection.objects.create(
        cloud_id=cloud_id,
        backend="kubernetes",
        endpoint=endpoint,
        scope=scope,
        credentials_ref=f"token-file:{token_file}",
        options=copy.deepcopy(options or {}),
        **fields,
    )
    connection.projects.add(*projects)
    return connection


@pytest.fixture
def kube_connection(db, kube, token_file, world):
    """A `k3s-lab` connection to the loopback server, namespace `tasks`, granted to project alpha only."""
    return kube_connection_to(kube.url, token_file, world.alpha, name="Lab cluster", options=TASK_OPTIONS)


def job(name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    """A batch/v1 Job manifest with these labels (on the Job and its pod template)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                },
            },
        },
    }


def ours(attempt: str, **extra: str) -> dict[str, str]:
    """The labels CloudPivot puts on an attempt's Job in this installation."""
    return {
        LABEL_INSTALLATION: label_value(settings.INSTALLATION_ID),
        LABEL_ATTEMPT: attempt,
        LABEL_TASK: "0f0e0d0c-0000-4000-8000-000000000000",
        **extra,
    }


def node(name: str, *, cpu: str, memory: str, gpus: str | None = None, ready: bool = True, labels=None) -> dict:
    """A v1 Node with this allocatable CPU, memory and GPUs (`nvidia.com/gpu`), Ready unless told."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = gpus
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
