"""The `kubernetes` execution backend: one `batch/v1` Job per Attempt (docs/backends/kubernetes.md).

Observation costs two API calls per connection per pass whatever the number of tasks: one LIST of
Jobs and one LIST of Pods, both by the installation label. Log copying is one call per running pod,
at most every `log_interval_seconds`, plus a final one when the pod ends.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from clusters.backends.base import (
    TASK_FIELDS_EVERYWHERE,
    AttemptRef,
    BackendError,
    ExecutionBackend,
    ExternalRef,
    Health,
    LogPiece,
    Observation,
)
from clusters.backends.kubernetes import egress_policy, figures, fit, inventory, logs, task_secrets
from clusters.backends.kubernetes.claims import claim_errors
from clusters.backends.kubernetes.client import KubeApiError, KubeClient
from clusters.backends.kubernetes.kubevirt_support import SNAPSHOT_API, snapshot_support
from clusters.backends.kubernetes.labels import LABEL_ATTEMPT, describe_labels, job_is_ours
from clusters.backends.kubernetes.manifest import job_manifest, resources_with_defaults
from clusters.backends.kubernetes.observation import PodView, container_started, newest_pod, observe_attempt
from clusters.backends.kubernetes.placement import placement_errors
from clusters.data_refs import PVC, pvc_volumes
from clusters.models import CloudConnection

KUBEVIRT_GROUP = "kubevirt.io"


class KubernetesBackend(ExecutionBackend):
    uses_runner = False
    inventory_kinds = inventory.INVENTORY_KINDS
    # A container: any image, requests/limits and GPUs, claims mounted, node choice where the connection allows.
    task_fields = TASK_FIELDS_EVERYWHERE | {
        "image",
        "cpu",
        "memory_mb",
        "gpu",
        "volumes",
        "node_selector",
        "tolerations",
    }
    image_choices = "recent"  # any registry reference: the user's recent images are offered, not a list
    egress_closes = frozenset({"none", "list"})  # a NetworkPolicy per Job's pods (egress_policy.py)
    data_kinds = frozenset({PVC})  # mounted as `volumes` are (clusters.data_refs.pvc_volumes)

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.client = KubeClient(connection)
        self.namespace = self.client.namespace
        self.options = self.client.options
        self.installation = self.client.installation
        self.selector = self.client.selector
        self._pods: dict[str, PodView] = {}

    @property
    def api_calls(self) -> int:
        """Requests sent by this backend's client (benchmarks and tests read it)."""
        return self.client.api_calls

    # ------------------------------------------------------------------ interface
    def validate(self, spec: dict[str, Any]) -> list[dict[str, str]]:
        errors = []
        if not spec.get("image"):
            errors.append(
                {
                    "field": "image",
                    "message": f"the {self.connection.cloud_id} cloud runs containers: name the container image "
                    'to run the command in, e.g. "image": "python:3.12-slim"',
                }
            )
        if spec.get("outputs"):  # docs/data.md: on Kubernetes, a PVC the task mounts keeps its files
            errors.append(
                {
                    "field": "outputs",
                    "message": f"the {self.connection.cloud_id} cloud cannot keep declared outputs yet; "
                    "write them to a volume (a PVC) instead",
                }
            )
        paths = [volume["mount_path"] for _field, volume in pvc_volumes(spec)]
        twice = sorted({path for path in paths if paths.count(path) > 1})
        if twice:
            errors.append({"field": "data", "message": f"mounted twice (in volumes and data): {', '.join(twice)}"})
        return errors + placement_errors(spec, self.options, cloud=self.connection.cloud_id)

    def task_defaults(self) -> dict[str, Any]:
        defaults = self.options.get("default_resources") or {}
        return {key: defaults[key] for key in ("cpu", "memory_mb") if defaults.get(key)}

    def task_resources(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The task's requests/limits: what it asked, else the connection's `default_resources` (its footprint)."""
        return resources_with_defaults(spec.get("resources") or {}, self.options)

    def fit_limits(self, asked: dict[str, Any]) -> tuple[list, list[str]]:
        """ResourceQuotas, LimitRanges and node allocatable of the namespace and cluster (fit.py)."""
        node_selector = dict(self.options.get("node_selector") or {}) | dict(asked.get("node_selector") or {})
        return fit.fit_limits(self.client, asked, node_selector=node_selector)

    def access_errors(self, spec: dict[str, Any], *, project_id: int, project: str) -> list[dict[str, str]]:
        """The claims the project's task may not mount (claims.py): one read per claim it names."""
        return claim_errors(self.client, pvc_volumes(spec), project=project)

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        name = attempt.external_name
        client = self.client
        self._check_claims_still_allowed(attempt)
        with_secrets = bool(attempt.spec.get("secrets"))
        if with_secrets:  # before the Job, whose pod would wait for it (task_secrets.py)
            task_secrets.ensure_secret(client, attempt, installation=self.installation)
        closed = egress_policy.closes(attempt)
        if closed:  # before the Job: its pod never runs a moment with more network than the task's egress
            egress_policy.ensure_policy(client, attempt, installation=self.installation)
        try:
            job = client.call(
                f"creating Job {name}", client.batch().create_namespaced_job, self.namespace, self.job(attempt)
            )
        except KubeApiError as exc:
            if exc.status != 409:
                raise
            existing = client.call(f"reading Job {name}", client.batch().read_namespaced_job, name, self.namespace)
            if self._is_ours(existing, attempt):
                if with_secrets:
                    task_secrets.own_secret(client, attempt, existing)
                if closed:
                    egress_policy.own_policy(client, attempt, existing)
                return ExternalRef(ref=existing["metadata"].get("uid", ""), adopted=True)
            labels = existing["metadata"].get("labels") or {}
            raise BackendError(
                f"a Job named {name} already exists in namespace {self.namespace} but was not created by this "
                f"CloudPivot installation for this attempt (its labels: {describe_labels(labels)}); "
                "it was left alone",
                kind="invalid_spec",
            ) from None
        if with_secrets:
            task_secrets.own_secret(client, attempt, job)
        if closed:
            egress_policy.own_policy(client, attempt, job)
        return ExternalRef(ref=job["metadata"].get("uid", ""), adopted=False)

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        if not attempts:
            return []
        jobs = self.client.jobs(label_selector=self.selector)
        pods = self.client.pods(what="listing pods", label_selector=self.selector)
        jobs_by_name = {
            job["metadata"]["name"]: job
            for job in jobs
            if (job["metadata"].get("labels") or {}).get(LABEL_ATTEMPT) == job["metadata"]["name"]
        }
        pods_by_attempt: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            attempt_name = (pod["metadata"].get("labels") or {}).get(LABEL_ATTEMPT)
            if attempt_name:
                pods_by_attempt.setdefault(attempt_name, []).append(pod)
        now = dt.datetime.now(dt.UTC)
        grace = float(self.options["image_pull_grace_seconds"])
        observations = []
        for attempt in attempts:
            pod = newest_pod(pods_by_attempt.get(attempt.external_name, []))
            observation = observe_attempt(
                attempt,
                jobs_by_name.get(attempt.external_name),
                pod,
                now,
                namespace=self.namespace,
                image_pull_grace=grace,
            )
            if pod is not None:
                self._pods[attempt.external_name] = PodView(
                    name=pod["metadata"]["name"],
                    started=container_started(pod),
                    finished=observation.phase in ("succeeded", "failed", "gone"),
                )
            observations.append(observation)
        return observations

    def stop(self, attempt: AttemptRef) -> None:
        """Delete the Job (its pod follows, Background propagation). Already gone is success."""
        self._delete_job(attempt)

    def cleanup(self, attempt: AttemptRef) -> bool:
        if attempt.spec.get("secrets"):  # the pod is done with it, even where finished Jobs are kept
            task_secrets.delete_secret(self.client, attempt)
        held = bool(attempt.spec.get("debug_hold_minutes"))  # its debug container may still be up: delete
        if self.options["keep_finished_jobs"] and not attempt.stop_requested and not held:
            return True  # the cluster's TTL controller removes it (and the NetworkPolicy it owns) in time
        gone = self._delete_job(attempt)
        if gone and egress_policy.closes(attempt):  # its owner's garbage collector would too; not left to it
            egress_policy.delete_policy(self.client, attempt)
        return gone

    def fetch_logs(self, attempt: AttemptRef, cursor: dict[str, Any]) -> tuple[list[LogPiece], dict[str, Any]]:
        """New log lines of the attempt's pod since `cursor`, each returned once (see logs.py)."""
        return logs.fetch_pod_logs(self.client, attempt, cursor, self._pods.get(attempt.external_name))

    def health(self) -> Health:
        try:
            version = self.client.server_version()
            self.client.jobs(what=f"listing Jobs in namespace {self.namespace}", limit=1)
        except BackendError as exc:
            return Health(ok=False, message=exc.message)
        return Health(
            ok=True,
            message=f"Kubernetes {version.get('gitVersion', '?')} at {self.client.host}: "
            f"reachable, credentials accepted, Jobs readable in namespace {self.namespace}",
        )

    # ------------------------------------------------------------------ optional abilities
    def permissions(self) -> list[dict[str, Any]]:
        return inventory.permissions(self.client)

    def inventory(self, kind: str) -> list[dict[str, Any]]:
        return inventory.inventory(self.client, kind)

    def metrics(self) -> dict[str, Any]:
        return figures.metrics(self.client)

    def vm_instances(self) -> tuple[bool, str]:
        if self.client.serves_api_group(KUBEVIRT_GROUP):
            return True, "KubeVirt VirtualMachines (kubevirt.io/v1)"
        return False, (
            "VM instances not available on this cluster: it does not serve the kubevirt.io API "
            "(KubeVirt is not installed)"
        )

    def vm_snapshots(self) -> tuple[bool | None, str]:
        available, message = self.vm_instances()
        if not available:
            return False, message
        support = snapshot_support(self.client)
        return support.available, support.message

    def feature_checks(self) -> list[dict[str, Any]]:
        """Where KubeVirt runs: whether VM snapshots work (KubeVirt >= 1.3.0, the Snapshot gate before 1.9)."""
        if not self.client.serves_api_group(KUBEVIRT_GROUP):
            return []
        support = snapshot_support(self.client)
        return [
            {
                "what": f"KubeVirt VM snapshots and restores ({SNAPSHOT_API})",
                "ok": bool(support.available),
                "required": False,
                "detail": support.message,
            }
        ]

    # ------------------------------------------------------------------ the Job
    def job(self, attempt: AttemptRef) -> dict[str, Any]:
        """The Job manifest for an attempt (manifest.py)."""
        return job_manifest(attempt, namespace=self.namespace, installation=self.installation, options=self.options)

    def _check_claims_still_allowed(self, attempt: AttemptRef) -> None:
        """Each start (a retry may come much later) mounts only claims the project may still use: the
        cluster's admin may have taken an annotation back, or a claim may have been replaced since submission."""
        volumes = pvc_volumes(attempt.spec)
        errors = claim_errors(self.client, volumes, project=attempt.spec.get("project") or "") if volumes else []
        if errors:
            raise BackendError(f"{errors[0]['field']}: {errors[0]['message']}", kind="invalid_spec")

    def _is_ours(self, job: dict[str, Any], attempt: AttemptRef) -> bool:
        return job_is_ours(
            job, external_name=attempt.external_name, task_id=attempt.task_id, installation=self.installation
        )

    def _delete_job(self, attempt: AttemptRef) -> bool:
        """Delete our Job (Background propagation: its pod follows); True when it is gone.

        Only our Job: the delete carries a UID precondition, so a Job of the same name that is not the
        attempt's (another installation's, or one made by hand) is never deleted. Without a recorded UID
        (the start never recorded one) the Job is read first and deleted only if its labels are ours.
        """
        name, uid = attempt.external_name, attempt.external_ref
        if not uid:
            job = self.client.job(name)
            if job is None or not self._is_ours(job, attempt):
                return True  # nothing of ours by that name
            uid = job["metadata"].get("uid", "")
        try:
            answer = self.client.delete_job(name, uid=uid)
        except KubeApiError as exc:
            if exc.status in (404, 409):  # gone, or the name now belongs to another object: ours is gone
                return True
            raise
        metadata = answer.get("metadata") or {}
        return not (answer.get("kind") == "Job" and metadata.get("finalizers"))
