"""CloudPivot's marks on Kubernetes objects: the labels every Job (and KubeVirt object) carries, and their values."""

from __future__ import annotations

import re
from typing import Any

LABEL_TASK = "cloudpivot.io/task"
LABEL_ATTEMPT = "cloudpivot.io/attempt"
LABEL_INSTALLATION = "cloudpivot.io/installation"
# On a KubeVirt VM and its DataVolume root disk (resources/backends/kubevirt.py): the instance it belongs to.
LABEL_INSTANCE = "cloudpivot.io/instance"
# On a PersistentVolumeClaim, set by the cluster's admin: the projects whose tasks may mount it ("a,b" or "*").
ANNOTATION_PROJECTS = "cloudpivot.io/projects"
CONTAINER = "main"


def label_value(text: str) -> str:
    """A valid Kubernetes label value: at most 63 of [A-Za-z0-9-_.], starting and ending alphanumeric."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:63]
    return value.strip("-_.") or "default"


def job_is_ours(job: dict[str, Any], *, external_name: str, task_id: str, installation: str) -> bool:
    """The Job carries this installation's labels for exactly this attempt."""
    labels = job["metadata"].get("labels") or {}
    return (
        labels.get(LABEL_ATTEMPT) == external_name
        and labels.get(LABEL_INSTALLATION) == installation
        and labels.get(LABEL_TASK) == label_value(task_id)
    )


def describe_labels(labels: dict[str, str]) -> str:
    ours = {key: value for key, value in labels.items() if key.startswith("cloudpivot.io/")}
    return ", ".join(f"{key}={value}" for key, value in sorted(ours.items())) or "none of CloudPivot's"
