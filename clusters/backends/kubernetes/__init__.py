"""Kubernetes: the one package that imports the `kubernetes` client; everything else uses its public names.

Cut by job: `client` (credentials, the configured ApiClient, errors in words → `KubeApiError`),
`backend` (the Job execution backend), `manifest` (the Job), `observation` (a Job and its pod → an
Observation), `logs` (the pod log cursor), `inventory` (nodes, namespaces, PVCs, pods; permissions),
`figures` (metrics.k8s.io and the sampler's figures), `labels` (CloudPivot's marks), `claims` (which PVCs
a project may mount or see), `placement` (the node selectors and tolerations a connection allows).

KubeVirt instances (resources/backends/kubevirt.py) and the orphan listers (orphans/listers/) stay in
their apps and talk to the cluster only through `KubeClient`'s plain-dict calls (`objects`, `object`,
`create_object`, `patch_object`, `delete_object`, `put_subresource`): they are the resources and orphans
apps' rules about VMs, snapshots and findings, not Kubernetes plumbing, and the client keeps the SDK,
the credentials, the timeouts and the error words in this one place.

Connection settings: docs/backends/kubernetes.md.
"""

from __future__ import annotations

from clusters.backends.kubernetes.backend import KubernetesBackend
from clusters.backends.kubernetes.client import DEFAULT_OPTIONS, KubeApiError, KubeClient, parse_credentials_ref
from clusters.backends.kubernetes.labels import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, label_value
from clusters.backends.kubernetes.logs import new_log_lines, read_pod_log, timestamp_ns

__all__ = [
    "DEFAULT_OPTIONS",
    "LABEL_ATTEMPT",
    "LABEL_INSTALLATION",
    "LABEL_TASK",
    "KubeApiError",
    "KubeClient",
    "KubernetesBackend",
    "label_value",
    "new_log_lines",
    "parse_credentials_ref",
    "read_pod_log",
    "timestamp_ns",
]
