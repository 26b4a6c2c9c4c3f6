"""The Kubernetes side: a realistic kmock API server on loopback (tests/clusters/kube_fixture.py), a token
file for it, a connection to it, and Job manifests as CloudPivot labels them."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from clusters.backends.kubernetes import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, label_value
from clusters.models import CloudConnection
from tests.clusters.kube_cluster import KubeCluster

TOKEN = "test-token-7f3a"  # the bearer token the loopback API server expects from CloudPivot


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


@pytest.fixture
def kube_connection(db, kube, token_file, world):
    """A `k3s-lab` connection to the loopback server, namespace `tasks`, granted to project alpha only."""
    connection = CloudConnection.objects.create(
        cloud_id="k3s-lab",
        name="Lab cluster",
        backend="kubernetes",
        endpoint=kube.url,
        scope="tasks",
        credentials_ref=f"token-file:{token_file}",
        options={"image_pull_grace_seconds": 60, "log_interval_seconds": 0},
    )
    connection.projects.add(world.alpha)
    return connection


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
