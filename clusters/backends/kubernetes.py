"""The `kubernetes` backend: one `batch/v1` Job per Attempt, on the official `kubernetes` client.

The only module that imports `kubernetes`. Connection settings (docs/backends/kubernetes.md):

- `endpoint`: the API server URL (token mode); `scope`: the namespace (default `default`).
- `credentials_ref`: `kubeconfig:PATH` (with `options.context`), `token-file:PATH` (with `endpoint` and
  `options.ca_file`), `env:NAME` (an environment variable holding a bearer token), `in-cluster` (the
  service account of the pod CloudPivot runs in), or a bare PATH (a kubeconfig if it looks like one,
  else a token file). Empty: no credentials (e.g. behind `kubectl proxy`). Tokens are never logged.
- `options`: defaults for every Job (`node_selector`, `tolerations`, `image_pull_secrets`,
  `service_account`, `ttl_seconds_after_finished`, `keep_finished_jobs`, `image_pull_grace_seconds`)
  and client settings (`context`, `ca_file`, `insecure_skip_tls_verify`, `request_timeout_seconds`,
  `log_interval_seconds`, `log_limit_bytes`).

Observation costs two API calls per connection per pass whatever the number of tasks: one LIST of
Jobs and one LIST of Pods, both by the installation label. Log copying is one call per running pod,
at most every `log_interval_seconds`, plus a final one when the pod ends.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from clusters.backends.base import AttemptRef, BackendError, ErrorKind, ExternalRef, Health, LogPiece, Observation
from clusters.models import CloudConnection

LABEL_TASK = "cloudpivot.io/task"
LABEL_ATTEMPT = "cloudpivot.io/attempt"
LABEL_INSTALLATION = "cloudpivot.io/installation"
CONTAINER = "main"

DEFAULT_OPTIONS: dict[str, Any] = {
    "ttl_seconds_after_finished": 24 * 3600,  # the cluster removes finished Jobs even if CloudPivot never does
    "keep_finished_jobs": False,  # True: cleanup leaves finished Jobs to ttlSecondsAfterFinished
    "image_pull_grace_seconds": 120,  # an image that cannot be pulled fails the task after this long
    "request_timeout_seconds": 30,
    "log_interval_seconds": 5,  # copy a running pod's log at most this often (always once more at its end)
    "log_limit_bytes": 8 * 1024 * 1024,  # at most this much log per copy; the rest follows next time
}
IMAGE_PULL_ERRORS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}
CONFIG_ERRORS = {"CreateContainerConfigError", "CreateContainerError"}
# Pod-level requirements of the backend, for check_cloud: (verb, API group, resource, subresource, what for).
REQUIRED_PERMISSIONS = [
    ("create", "batch", "jobs", "", "start tasks"),
    ("get", "batch", "jobs", "", "adopt a Job after a restart"),
    ("list", "batch", "jobs", "", "observe tasks"),
    ("watch", "batch", "jobs", "", "notice changes promptly"),
    ("delete", "batch", "jobs", "", "cancel tasks and clean up"),
    ("list", "", "pods", "", "observe tasks"),
    ("get", "", "pods", "log", "copy task logs"),
]
OPTIONAL_PERMISSIONS = [
    ("list", "", "persistentvolumeclaims", "", "list PVCs in the inventory"),
    ("list", "", "nodes", "", "list nodes in the inventory"),
    ("list", "", "namespaces", "", "list namespaces in the inventory"),
    ("list", "metrics.k8s.io", "pods", "", "show pod metrics"),
    ("list", "metrics.k8s.io", "nodes", "", "show node metrics"),
]
INVENTORY_KINDS = ("nodes", "namespaces", "pvcs", "pods")

# When each attempt's running pod log was last copied (per process): throttles log copying to log_interval_seconds.
_last_log_copy: dict[tuple[str, str], float] = {}
_last_log_copy_lock = threading.Lock()


class KubeApiError(BackendError):
    """A BackendError that remembers the HTTP status the API server answered (0: no answer)."""

    def __init__(self, message: str, *, kind: ErrorKind, status: int = 0) -> None:
        super().__init__(message, kind=kind)
        self.status = status


@dataclass(frozen=True)
class _PodView:
    """What observe learned about an attempt's pod, for fetch_logs in the same pass."""

    name: str
    started: bool  # the container has started, so it has a log
    finished: bool  # the pod will write no more


class KubernetesBackend:
    uses_runner = False
    inventory_kinds = INVENTORY_KINDS

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.namespace = connection.scope or "default"
        self.options = DEFAULT_OPTIONS | (connection.options or {})
        self.installation = label_value(settings.INSTALLATION_ID)
        self.selector = f"{LABEL_INSTALLATION}={self.installation}"
        self._client: k8s.ApiClient | None = None
        self._pods: dict[str, _PodView] = {}
        self.api_calls = 0  # requests sent by this instance (benchmarks and tests read it)

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
        return errors

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        name = attempt.external_name
        try:
            job = self._call(
                f"creating Job {name}", self._batch().create_namespaced_job, self.namespace, self.job(attempt)
            )
        except KubeApiError as exc:
            if exc.status != 409:
                raise
            existing = self._call(f"reading Job {name}", self._batch().read_namespaced_job, name, self.namespace)
            if _is_ours(existing, attempt, self.installation):
                return ExternalRef(ref=existing["metadata"].get("uid", ""), adopted=True)
            labels = existing["metadata"].get("labels") or {}
            raise BackendError(
                f"a Job named {name} already exists in namespace {self.namespace} but was not created by this "
                f"CloudPivot installation for this attempt (its labels: {_describe_labels(labels)}); "
                "it was left alone",
                kind="invalid_spec",
            ) from None
        return ExternalRef(ref=job["metadata"].get("uid", ""), adopted=False)

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        if not attempts:
            return []
        jobs = self._call(
            "listing Jobs", self._batch().list_namespaced_job, self.namespace, label_selector=self.selector
        )
        pods = self._call(
            "listing pods", self._core().list_namespaced_pod, self.namespace, label_selector=self.selector
        )
        jobs_by_name = {
            job["metadata"]["name"]: job
            for job in jobs.get("items") or []
            if (job["metadata"].get("labels") or {}).get(LABEL_ATTEMPT) == job["metadata"]["name"]
        }
        pods_by_attempt: dict[str, list[dict[str, Any]]] = {}
        for pod in pods.get("items") or []:
            attempt_name = (pod["metadata"].get("labels") or {}).get(LABEL_ATTEMPT)
            if attempt_name:
                pods_by_attempt.setdefault(attempt_name, []).append(pod)
        now = dt.datetime.now(dt.UTC)
        observations = []
        for attempt in attempts:
            candidates = pods_by_attempt.get(attempt.external_name, [])
            pod = max(candidates, key=lambda p: p["metadata"].get("creationTimestamp") or "") if candidates else None
            observation = self._observe_one(attempt, jobs_by_name.get(attempt.external_name), pod, now)
            if pod is not None:
                self._pods[attempt.external_name] = _PodView(
                    name=pod["metadata"]["name"],
                    started=_container_started(pod),
                    finished=observation.phase in ("succeeded", "failed", "gone"),
                )
            observations.append(observation)
        return observations

    def stop(self, attempt: AttemptRef) -> None:
        """Delete the Job (its pod follows, Background propagation). Already gone is success."""
        self._delete_job(attempt)

    def cleanup(self, attempt: AttemptRef) -> bool:
        if self.options["keep_finished_jobs"] and not attempt.stop_requested:
            return True  # the cluster's TTL controller removes it after ttl_seconds_after_finished
        return self._delete_job(attempt)

    def fetch_logs(self, attempt: AttemptRef, cursor: dict[str, Any]) -> tuple[list[LogPiece], dict[str, Any]]:
        """New log lines of the attempt's pod since `cursor`, each returned once.

        The pod log is read with timestamps; the cursor keeps the last line's timestamp (ns) and how many lines
        carried exactly that timestamp. The API server passes `sinceTime` to the kubelet with second precision,
        so lines before the cursor come back and are dropped here.
        """
        view = self._pods.get(attempt.external_name)
        key = (self.connection.cloud_id, attempt.external_name)
        if view is None:
            view = self._find_pod(attempt)
            if view is None:
                return [], cursor
        if not view.started:
            return [], cursor
        if not view.finished:
            with _last_log_copy_lock:
                last = _last_log_copy.get(key)
                if last is not None and time.monotonic() - last < float(self.options["log_interval_seconds"]):
                    return [], cursor
                if len(_last_log_copy) > 100_000:  # attempts that vanished never pop their entry
                    _last_log_copy.clear()
                _last_log_copy[key] = time.monotonic()
        else:
            with _last_log_copy_lock:
                _last_log_copy.pop(key, None)
        if cursor.get("pod") != view.name:
            cursor = {"pod": view.name}
        limit = int(self.options["log_limit_bytes"])
        for _ in range(6):
            try:
                raw = self._pod_log(view.name, since=cursor.get("since"), limit=limit)
            except KubeApiError as exc:
                if exc.status in (400, 404):  # not started yet, or already gone: nothing to copy now
                    return [], cursor
                raise
            data, new_cursor = _new_log_lines(raw, cursor, limit=limit)
            # sinceTime has whole seconds: lines already copied come back first. If they alone fill the
            # limit, ask again for more rather than stall.
            if data or len(raw) < limit:
                break
            limit *= 4
        cursor = new_cursor
        return ([LogPiece("stdout", data)] if data else []), cursor

    def health(self) -> Health:
        try:
            version = self._call("reading the server version", k8s.VersionApi(self._api()).get_code)
            self._call(
                f"listing Jobs in namespace {self.namespace}",
                self._batch().list_namespaced_job,
                self.namespace,
                limit=1,
            )
        except BackendError as exc:
            return Health(ok=False, message=exc.message)
        return Health(
            ok=True,
            message=f"Kubernetes {version.get('gitVersion', '?')} at {self._api().configuration.host}: "
            f"reachable, credentials accepted, Jobs readable in namespace {self.namespace}",
        )

    def serves_api_group(self, group: str) -> bool:
        """Whether the cluster serves an API group (discovery, GET /apis): e.g. kubevirt.io where KubeVirt runs."""
        groups = self._call("discovering the served API groups", k8s.ApisApi(self._api()).get_api_versions)
        return any(entry.get("name") == group for entry in groups.get("groups") or [])

    # ------------------------------------------------------------------ permissions, inventory, metrics
    def permissions(self) -> list[dict[str, Any]]:
        """Ask the API server (SelfSubjectAccessReview) whether our credentials may do each thing we need."""
        results = []
        for required, table in ((True, REQUIRED_PERMISSIONS), (False, OPTIONAL_PERMISSIONS)):
            for verb, group, resource, subresource, purpose in table:
                cluster_wide = resource in ("nodes", "namespaces")
                attributes = {"verb": verb, "group": group, "resource": resource}
                if subresource:
                    attributes["subresource"] = subresource
                if not cluster_wide:
                    attributes["namespace"] = self.namespace
                review = self._call(
                    f"checking permission to {verb} {resource}",
                    k8s.AuthorizationV1Api(self._api()).create_self_subject_access_review,
                    {
                        "apiVersion": "authorization.k8s.io/v1",
                        "kind": "SelfSubjectAccessReview",
                        "spec": {"resourceAttributes": attributes},
                    },
                )
                status = review.get("status") or {}
                results.append(
                    {
                        "verb": verb,
                        "group": group,
                        "resource": f"{resource}/{subresource}" if subresource else resource,
                        "namespace": "" if cluster_wide else self.namespace,
                        "purpose": purpose,
                        "required": required,
                        "allowed": bool(status.get("allowed")),
                        "reason": status.get("reason") or status.get("evaluationError") or "",
                    }
                )
        return results

    def inventory(self, kind: str) -> list[dict[str, Any]]:
        if kind == "nodes":
            items = self._call("listing nodes", self._core().list_node).get("items") or []
            return [_node_summary(node) for node in items]
        if kind == "namespaces":
            items = self._call("listing namespaces", self._core().list_namespace).get("items") or []
            return [
                {
                    "name": ns["metadata"]["name"],
                    "phase": (ns.get("status") or {}).get("phase", ""),
                    "created": ns["metadata"].get("creationTimestamp"),
                    "labels": ns["metadata"].get("labels") or {},
                }
                for ns in items
            ]
        if kind == "pvcs":
            items = self._call(
                f"listing PersistentVolumeClaims in namespace {self.namespace}",
                self._core().list_namespaced_persistent_volume_claim,
                self.namespace,
            ).get("items")
            return [_pvc_summary(pvc) for pvc in items or []]
        if kind == "pods":
            items = self._call(
                f"listing the pods of CloudPivot tasks in namespace {self.namespace}",
                self._core().list_namespaced_pod,
                self.namespace,
                label_selector=self.selector,
            ).get("items")
            return [_pod_summary(pod) for pod in items or []]
        raise BackendError(
            f"unknown resource kind '{kind}' for the {self.connection.cloud_id} cloud; "
            f"kinds: {', '.join(INVENTORY_KINDS)}",
            kind="not_found",
        )

    def metrics(self) -> dict[str, Any]:
        """CPU and memory in use from metrics.k8s.io (metrics-server): nodes and the pods of our tasks."""
        custom = k8s.CustomObjectsApi(self._api())
        out: dict[str, Any] = {"nodes": [], "pods": [], "errors": []}
        try:
            pods = self._call(
                "reading pod metrics",
                custom.list_namespaced_custom_object,
                "metrics.k8s.io",
                "v1beta1",
                self.namespace,
                "pods",
                label_selector=self.selector,
            )
        except KubeApiError as exc:
            if exc.status in (404, 503):
                raise BackendError(
                    f"metrics API not available on this cluster ({self.connection.cloud_id}): the metrics.k8s.io "
                    "API is not served; install metrics-server to see CPU and memory use",
                    kind="not_found",
                ) from None
            raise
        out["pods"] = [_pod_metrics(item) for item in pods.get("items") or []]
        try:
            nodes = self._call(
                "reading node metrics", custom.list_cluster_custom_object, "metrics.k8s.io", "v1beta1", "nodes"
            )
            out["nodes"] = [_node_metrics(item) for item in nodes.get("items") or []]
        except BackendError as exc:
            out["errors"].append(exc.message)
        return out

    # ------------------------------------------------------------------ the Job
    def job(self, attempt: AttemptRef) -> dict[str, Any]:
        """The Job manifest for an attempt: literal argv, no retries by Kubernetes, our labels."""
        spec = attempt.spec
        labels = {
            LABEL_TASK: label_value(attempt.task_id),
            LABEL_ATTEMPT: attempt.external_name,
            LABEL_INSTALLATION: self.installation,
        }
        container: dict[str, Any] = {
            "name": CONTAINER,
            "image": spec["image"],
            "command": list(spec["command"]),
            "env": [{"name": key, "value": value} for key, value in (spec.get("env") or {}).items()],
            "resources": _resources(spec.get("resources") or {}),
        }
        if spec.get("workdir"):
            container["workingDir"] = spec["workdir"]
        volumes = spec.get("volumes") or []
        if volumes:
            container["volumeMounts"] = [
                {"name": f"vol-{i}", "mountPath": v["mount_path"], "readOnly": bool(v.get("read_only"))}
                for i, v in enumerate(volumes)
            ]
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "containers": [container],
            # A task gets no API credentials unless the connection names a service account for it.
            "automountServiceAccountToken": bool(self.options.get("service_account")),
        }
        if self.options.get("service_account"):
            pod_spec["serviceAccountName"] = self.options["service_account"]
        if volumes:
            pod_spec["volumes"] = [
                {
                    "name": f"vol-{i}",
                    "persistentVolumeClaim": {"claimName": v["claim"], "readOnly": bool(v.get("read_only"))},
                }
                for i, v in enumerate(volumes)
            ]
        node_selector = dict(self.options.get("node_selector") or {}) | dict(spec.get("node_selector") or {})
        if node_selector:
            pod_spec["nodeSelector"] = node_selector
        tolerations = [
            _toleration(t) for t in list(self.options.get("tolerations") or []) + list(spec.get("tolerations") or [])
        ]
        if tolerations:
            pod_spec["tolerations"] = tolerations
        if self.options.get("image_pull_secrets"):
            pod_spec["imagePullSecrets"] = [{"name": name} for name in self.options["image_pull_secrets"]]
        job_spec: dict[str, Any] = {
            "backoffLimit": 0,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        }
        if spec.get("timeout_seconds"):
            job_spec["activeDeadlineSeconds"] = int(spec["timeout_seconds"])
        if self.options.get("ttl_seconds_after_finished") is not None:
            job_spec["ttlSecondsAfterFinished"] = int(self.options["ttl_seconds_after_finished"])
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": attempt.external_name,
                "namespace": self.namespace,
                "labels": labels,
                "annotations": {"cloudpivot.io/attempt-number": str(attempt.number)},
            },
            "spec": job_spec,
        }

    def _observe_one(
        self, attempt: AttemptRef, job: dict[str, Any] | None, pod: dict[str, Any] | None, now: dt.datetime
    ) -> Observation:
        """Map a Job and its newest pod to what happened to the program (see the table in the docs)."""
        name = attempt.external_name
        if job is None:
            return Observation(
                name,
                exists=False,
                phase="gone",
                reason=f"the Job {name} no longer exists in namespace {self.namespace}",
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
        return self._pod_observation(name, pod, now, evidence)

    def _pod_observation(
        self, name: str, pod: dict[str, Any], now: dt.datetime, evidence: dict[str, Any]
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
            grace = float(self.options["image_pull_grace_seconds"])
            age = (now - _parse_time(pod["metadata"].get("creationTimestamp"), now)).total_seconds()
            image = _container_image(pod)
            if reason in IMAGE_PULL_ERRORS:
                words = f"the image {image} cannot be pulled ({reason}: {waiting.get('message') or 'no details'})"
            else:
                words = f"the container cannot be created ({reason}: {waiting.get('message') or 'no details'})"
            if reason == "InvalidImageName" or age >= grace:
                return Observation(
                    name, exists=True, phase="failed", reason=words, evidence=evidence | {"waiting": reason}
                )
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

    # ------------------------------------------------------------------ API plumbing
    def _api(self) -> k8s.ApiClient:
        if self._client is None:
            self._client = k8s.ApiClient(self._configuration())
        return self._client

    def _batch(self) -> k8s.BatchV1Api:
        return k8s.BatchV1Api(self._api())

    def _core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self._api())

    def _configuration(self) -> k8s.Configuration:
        """Client settings from the connection. The one place a client is configured; tokens stay in memory."""
        cfg = k8s.Configuration()
        mode, value = parse_credentials_ref(self.connection.credentials_ref)
        where = f"connection {self.connection.cloud_id}"
        try:
            if mode == "kubeconfig":
                k8s_config.load_kube_config(
                    config_file=value,
                    context=self.options.get("context") or None,
                    client_configuration=cfg,
                    persist_config=False,
                )
            elif mode == "in-cluster":
                k8s_config.load_incluster_config(client_configuration=cfg)
            else:
                if not self.connection.endpoint:
                    raise BackendError(f"{where} has no endpoint (the API server URL)", kind="auth")
                cfg.host = self.connection.endpoint.rstrip("/")
                token = _read_token(mode, value, where)
                if token:
                    cfg.api_key = {"BearerToken": token}
                    cfg.api_key_prefix = {"BearerToken": "Bearer"}
                if self.options.get("ca_file"):
                    cfg.ssl_ca_cert = self.options["ca_file"]
        except (ConfigException, OSError, yaml.YAMLError) as exc:
            raise BackendError(f"cannot load the Kubernetes credentials of {where}: {exc}", kind="auth") from None
        if self.options.get("insecure_skip_tls_verify"):
            cfg.verify_ssl = False
        cfg.retries = 1
        return cfg

    def _timeout(self) -> tuple[float, float]:
        total = float(self.options["request_timeout_seconds"])
        return (min(5.0, total), total)

    def _call(self, what: str, method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Call one API method; return its JSON as plain dicts, or raise a BackendError in words."""
        self.api_calls += 1
        try:
            response = method(*args, _preload_content=False, _request_timeout=self._timeout(), **kwargs)
            body = response.data
        except ApiException as exc:
            raise _classify(exc, what, self) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeApiError(
                f"cannot reach the Kubernetes API at {self._api().configuration.host} while {what}: "
                f"{type(exc).__name__}",
                kind="transient",
            ) from None
        try:
            return json.loads(body) if body else {}
        except ValueError:
            raise KubeApiError(
                f"the Kubernetes API answered something that is not JSON while {what}", kind="transient"
            ) from None

    def _delete_job(self, attempt: AttemptRef) -> bool:
        """Delete our Job (Background propagation: its pod follows); True when it is gone.

        Only our Job: the delete carries a UID precondition, so a Job of the same name that is not the
        attempt's (another installation's, or one made by hand) is never deleted. Without a recorded UID
        (the start never recorded one) the Job is read first and deleted only if its labels are ours.
        """
        name, uid = attempt.external_name, attempt.external_ref
        if not uid:
            try:
                job = self._call(f"reading Job {name}", self._batch().read_namespaced_job, name, self.namespace)
            except KubeApiError as exc:
                if exc.status == 404:
                    return True
                raise
            if not _is_ours(job, attempt, self.installation):
                return True  # nothing of ours by that name
            uid = job["metadata"].get("uid", "")
        try:
            answer = self._call(
                f"deleting Job {name}",
                self._batch().delete_namespaced_job,
                name,
                self.namespace,
                propagation_policy="Background",
                body={"propagationPolicy": "Background", "preconditions": {"uid": uid}},
            )
        except KubeApiError as exc:
            if exc.status in (404, 409):  # gone, or the name now belongs to another object: ours is gone
                return True
            raise
        metadata = answer.get("metadata") or {}
        return not (answer.get("kind") == "Job" and metadata.get("finalizers"))

    def _find_pod(self, attempt: AttemptRef) -> _PodView | None:
        pods = self._call(
            f"listing the pods of {attempt.external_name}",
            self._core().list_namespaced_pod,
            self.namespace,
            label_selector=f"{LABEL_ATTEMPT}={attempt.external_name},{self.selector}",
        ).get("items")
        if not pods:
            return None
        pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        phase = (pod.get("status") or {}).get("phase")
        return _PodView(
            name=pod["metadata"]["name"], started=_container_started(pod), finished=phase in ("Succeeded", "Failed")
        )

    def _pod_log(self, pod: str, *, since: str | None, limit: int) -> bytes:
        """GET the pod log with timestamps (the generated method lacks `sinceTime`, so the client's generic call)."""
        api = self._api()
        query: list[tuple[str, Any]] = [
            ("container", CONTAINER),
            ("timestamps", "true"),
            ("limitBytes", limit),
        ]
        if since:
            query.append(("sinceTime", since))
        method, url, headers, body, post = api.param_serialize(
            method="GET",
            resource_path="/api/v1/namespaces/{namespace}/pods/{name}/log",
            path_params={"namespace": self.namespace, "name": pod},
            query_params=query,
            header_params={"Accept": "text/plain"},
            auth_settings=["BearerToken"],
        )
        self.api_calls += 1
        what = f"reading the log of pod {pod}"
        try:
            response = api.call_api(
                method, url, header_params=headers, body=body, post_params=post, _request_timeout=self._timeout()
            )
            response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeApiError(
                f"cannot reach the Kubernetes API while {what}: {type(exc).__name__}", kind="transient"
            ) from None
        if not 200 <= response.status <= 299:
            raise _classify(ApiException(http_resp=response), what, self)
        return response.data or b""


# ---------------------------------------------------------------------- helpers (plain data)
def label_value(text: str) -> str:
    """A valid Kubernetes label value: at most 63 of [A-Za-z0-9-_.], starting and ending alphanumeric."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "-", text)[:63]
    return value.strip("-_.") or "default"


def parse_credentials_ref(ref: str) -> tuple[str, str]:
    """('kubeconfig' | 'token-file' | 'env' | 'in-cluster' | 'none', value) from a credentials_ref."""
    ref = (ref or "").strip()
    if not ref:
        return "none", ""
    if ref == "in-cluster":
        return "in-cluster", ""
    for prefix in ("kubeconfig", "token-file", "env"):
        if ref.startswith(prefix + ":"):
            return prefix, ref[len(prefix) + 1 :]
    try:
        text = Path(ref).read_text()[:65536]
        looks_like_kubeconfig = isinstance(yaml.safe_load(text), dict)
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        looks_like_kubeconfig = False
    return ("kubeconfig" if looks_like_kubeconfig else "token-file"), ref


def _read_token(mode: str, value: str, where: str) -> str:
    if mode == "none":
        return ""
    if mode == "env":
        token = os.environ.get(value, "").strip()
        if not token:
            raise BackendError(f"the environment variable {value} named by {where} is not set", kind="auth")
        return token
    token = Path(value).read_text().strip()  # re-read on every client: rotated tokens are picked up
    if not token:
        raise BackendError(f"the token file {value} of {where} is empty", kind="auth")
    return token


def _classify(exc: ApiException, what: str, backend: KubernetesBackend) -> KubeApiError:
    """An ApiException in words users understand, with the kind of error (DESIGN §4)."""
    status = int(exc.status or 0)
    message = _status_message(exc)
    where = f"namespace {backend.namespace} on {backend.connection.cloud_id}"
    if status == 401:
        return KubeApiError(
            f"the Kubernetes API refused the credentials of {backend.connection.cloud_id} while {what} "
            "(401 Unauthorized): check its token or kubeconfig",
            kind="auth",
            status=status,
        )
    if status == 403:
        if "exceeded quota" in message or "forbidden: exceeded" in message:
            return KubeApiError(
                f"the namespace's ResourceQuota does not allow it ({what}): {message}", kind="quota", status=status
            )
        return KubeApiError(
            f"the credentials of {backend.connection.cloud_id} may not do this ({what}; 403 Forbidden): {message}",
            kind="auth",
            status=status,
        )
    if status == 404:
        return KubeApiError(f"not found while {what} in {where}: {message}", kind="not_found", status=status)
    if status in (400, 422):
        return KubeApiError(
            f"Kubernetes refused it as invalid while {what}: {message}", kind="invalid_spec", status=status
        )
    if status == 409:
        return KubeApiError(f"conflict while {what}: {message}", kind="transient", status=status)
    if status == 429:
        return KubeApiError(
            f"the Kubernetes API is busy (429) while {what}; will retry", kind="transient", status=status
        )
    return KubeApiError(
        f"the Kubernetes API failed while {what} ({status or 'no answer'}): {message}", kind="transient", status=status
    )


def _status_message(exc: ApiException) -> str:
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        message = json.loads(body or "").get("message") or ""
    except (ValueError, AttributeError):
        message = (body or "").strip()
    return (message or str(exc.reason or "")).strip()[:500]


def _is_ours(job: dict[str, Any], attempt: AttemptRef, installation: str) -> bool:
    labels = job["metadata"].get("labels") or {}
    return (
        labels.get(LABEL_ATTEMPT) == attempt.external_name
        and labels.get(LABEL_INSTALLATION) == installation
        and labels.get(LABEL_TASK) == label_value(attempt.task_id)
    )


def _describe_labels(labels: dict[str, str]) -> str:
    ours = {key: value for key, value in labels.items() if key.startswith("cloudpivot.io/")}
    return ", ".join(f"{key}={value}" for key, value in sorted(ours.items())) or "none of CloudPivot's"


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


def _container_status(pod: dict[str, Any]) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return status
    return {}


def _container_state(pod: dict[str, Any] | None, which: str) -> dict[str, Any] | None:
    if not pod:
        return None
    state = (_container_status(pod).get("state") or {}).get(which)
    return state if isinstance(state, dict) else None


def _container_started(pod: dict[str, Any]) -> bool:
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


_TIMESTAMP = re.compile(rb"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$")


def timestamp_ns(text: bytes) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 (nano) timestamp as the kubelet writes them; None if not one."""
    match = _TIMESTAMP.match(text)
    if not match:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = (match.group(7) or b"").ljust(9, b"0")
    zone = match.group(8)
    offset = 0
    if zone != b"Z":
        sign = 1 if zone[:1] == b"+" else -1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    seconds = int(dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC).timestamp()) - offset
    return seconds * 1_000_000_000 + int(fraction)


def _new_log_lines(raw: bytes, cursor: dict[str, Any], *, limit: int) -> tuple[bytes, dict[str, Any]]:
    """Lines of a timestamped log past the cursor, and the cursor after them.

    The cursor is {"pod", "since" (the last line's timestamp text), "since_ns", "skip" (lines seen with
    exactly that timestamp)}. A response cut at `limit` bytes drops its incomplete last line (read again next time).
    """
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    if complete:
        lines = lines[:-1]
    elif len(raw) >= limit and len(lines) > 1:
        lines = lines[:-1]  # cut by limitBytes: the rest of this line comes next time
        complete = True
    since_ns = int(cursor.get("since_ns") or 0)
    skip = int(cursor.get("skip") or 0)
    seen_at_since = 0
    out = bytearray()
    new_cursor = dict(cursor)
    for index, line in enumerate(lines):
        stamp, _, content = line.partition(b" ")
        ns = timestamp_ns(stamp)
        if ns is None:  # not a timestamped line (should not happen): keep it, it cannot be placed
            ns, content = since_ns, line
        if ns < since_ns:
            continue
        if ns == since_ns and cursor.get("since"):
            seen_at_since += 1
            if seen_at_since <= skip:
                continue
        last_line = index == len(lines) - 1
        out += content + (b"" if last_line and not complete else b"\n")
        if ns == int(new_cursor.get("since_ns") or 0) and new_cursor.get("since"):
            new_cursor["skip"] = int(new_cursor.get("skip") or 0) + 1
        else:
            new_cursor.update(since=stamp.decode("ascii", "replace"), since_ns=ns, skip=1)
    return bytes(out), new_cursor


def _quantity(value: Any) -> str:
    return str(value) if value is not None else ""


def _node_summary(node: dict[str, Any]) -> dict[str, Any]:
    metadata, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    conditions = status.get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), {})
    labels = metadata.get("labels") or {}
    keys = ("cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage")
    return {
        "name": metadata["name"],
        "ready": str(ready.get("status")) == "True",
        "unschedulable": bool(spec.get("unschedulable")),
        "roles": sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")),
        "kubelet_version": (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
        "capacity": {
            k: _quantity((status.get("capacity") or {}).get(k)) for k in keys if k in (status.get("capacity") or {})
        },
        "allocatable": {
            k: _quantity((status.get("allocatable") or {}).get(k))
            for k in keys
            if k in (status.get("allocatable") or {})
        },
        "conditions": [
            {k: c.get(k, "") for k in ("type", "status", "reason", "message", "lastTransitionTime")} for c in conditions
        ],
        "taints": spec.get("taints") or [],
    }


def _pvc_summary(pvc: dict[str, Any]) -> dict[str, Any]:
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    return {
        "name": pvc["metadata"]["name"],
        "phase": status.get("phase", ""),
        "storage_class": spec.get("storageClassName") or "",
        "requested": ((spec.get("resources") or {}).get("requests") or {}).get("storage", ""),
        "capacity": (status.get("capacity") or {}).get("storage", ""),
        "access_modes": spec.get("accessModes") or [],
        "volume": spec.get("volumeName") or "",
    }


def _pod_summary(pod: dict[str, Any]) -> dict[str, Any]:
    labels = pod["metadata"].get("labels") or {}
    status = pod.get("status") or {}
    container = _container_status(pod)
    state = container.get("state") or {}
    detail = next(iter(state.values()), {}) if state else {}
    return {
        "name": pod["metadata"]["name"],
        "task": labels.get(LABEL_TASK, ""),
        "attempt": labels.get(LABEL_ATTEMPT, ""),
        "phase": status.get("phase", ""),
        "node": (pod.get("spec") or {}).get("nodeName") or "",
        "container_state": next(iter(state), ""),
        "reason": (detail or {}).get("reason") or status.get("reason") or "",
        "started": status.get("startTime"),
    }


def _pod_metrics(item: dict[str, Any]) -> dict[str, Any]:
    containers = item.get("containers") or []
    usage = next((c.get("usage") or {} for c in containers if c.get("name") == CONTAINER), {})
    labels = item["metadata"].get("labels") or {}
    return {
        "name": item["metadata"]["name"],
        "attempt": labels.get(LABEL_ATTEMPT, ""),
        "cpu": usage.get("cpu", ""),
        "memory": usage.get("memory", ""),
        "window": item.get("window", ""),
        "timestamp": item.get("timestamp", ""),
    }


def _node_metrics(item: dict[str, Any]) -> dict[str, Any]:
    usage = item.get("usage") or {}
    return {
        "name": item["metadata"]["name"],
        "cpu": usage.get("cpu", ""),
        "memory": usage.get("memory", ""),
        "window": item.get("window", ""),
        "timestamp": item.get("timestamp", ""),
    }
