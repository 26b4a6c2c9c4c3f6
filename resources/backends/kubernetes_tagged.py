"""Kubernetes resources CloudPivot labelled: the Jobs of batch-task attempts, by the installation label.

One LIST per scan in the connection's namespace. A delete carries the Job's uid as a precondition, so a
Job recreated under the same name meanwhile is never the one deleted.

Extension point: KubeVirt VirtualMachines (persistent instances on Kubernetes) will be listed here too, by
the same installation label, as kind "vm", once the instance backend for KubeVirt exists.
"""

from __future__ import annotations

from typing import Any

from clusters.backends.base import BackendError
from clusters.backends.kubernetes import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, KubeApiError, KubernetesBackend
from clusters.models import CloudConnection
from resources.backends.tagged import JOB, PROTECTED_LABEL, CloudItem, is_true


class KubernetesTagged:
    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self._backend = KubernetesBackend(connection)
        self.namespace = self._backend.namespace
        self.notes: list[str] = []

    def items(self) -> list[CloudItem]:
        backend = self._backend
        answer = backend._call(
            "listing Jobs", backend._batch().list_namespaced_job, self.namespace, label_selector=backend.selector
        )
        found = [self._item(job) for job in answer.get("items") or []]
        return [item for item in found if item.ours]  # the selector is the server's; checked again here

    def read(self, kind: str, ref: str) -> CloudItem | None:
        if kind != JOB:
            raise BackendError(f"the Kubernetes lister knows no {kind!r} resources", kind="invalid_spec")
        backend = self._backend
        try:
            job = backend._call(f"reading Job {ref}", backend._batch().read_namespaced_job, ref, self.namespace)
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise
        return self._item(job)

    def delete(self, item: CloudItem) -> None:
        backend = self._backend
        try:
            backend._call(
                f"deleting Job {item.ref}",
                backend._batch().delete_namespaced_job,
                item.ref,
                self.namespace,
                propagation_policy="Background",
                body={"propagationPolicy": "Background", "preconditions": {"uid": item.uid}},
            )
        except KubeApiError as exc:
            if exc.status != 404:  # already gone is what was asked
                raise

    def _item(self, job: dict[str, Any]) -> CloudItem:
        metadata = job.get("metadata") or {}
        labels = metadata.get("labels") or {}
        annotations = metadata.get("annotations") or {}
        status = job.get("status") or {}
        conditions = [c.get("type") for c in status.get("conditions") or [] if str(c.get("status")) == "True"]
        protected = is_true(labels.get(PROTECTED_LABEL)) or is_true(annotations.get(PROTECTED_LABEL))
        return CloudItem(
            kind=JOB,
            ref=metadata.get("name", ""),
            name=metadata.get("name", ""),
            status=",".join(conditions) or ("Active" if status.get("active") else "Pending"),
            ours=labels.get(LABEL_INSTALLATION) == self._backend.installation,
            owner={
                key: labels[label]
                for key, label in (("attempt", LABEL_ATTEMPT), ("task", LABEL_TASK))
                if labels.get(label)
            },
            protected_reason=f"labelled {PROTECTED_LABEL}" if protected else "",
            uid=metadata.get("uid", ""),
            evidence={
                "namespace": metadata.get("namespace", self.namespace),
                "labels": {k: v for k, v in labels.items() if k.startswith("cloudpivot.io/")},
                "created_at": metadata.get("creationTimestamp"),
                "active": status.get("active", 0),
            },
        )
