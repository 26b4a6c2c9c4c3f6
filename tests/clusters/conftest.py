"""Fixtures for the Kubernetes backend: a realistic kmock API server on loopback and a connection to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters.models import CloudConnection
from tests.clusters.kube_fixture import KubeCluster

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
