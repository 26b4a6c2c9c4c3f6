"""The public client of a Kubernetes connection: credentials, the configured ApiClient, and errors in words.

Everything in CloudPivot that talks to a cluster (the Job backend, KubeVirt instances, the orphan
listers, metrics, check_cloud) goes through one `KubeClient`, so timeouts, credentials and the words
of an error are the same everywhere. Its methods answer plain dicts (the API's JSON), never SDK objects,
and raise `KubeApiError` (a BackendError that keeps the HTTP status).

Credentials (`credentials_ref`): `kubeconfig:PATH` (with `options.context`), `token-file:PATH` (with
`endpoint` and `options.ca_file`), `env:NAME` (a variable holding a bearer token), `in-cluster`, or a bare
PATH (a kubeconfig if it looks like one, else a token file). Empty: none (e.g. behind `kubectl proxy`).
Tokens stay in memory and are never logged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import urllib3
import yaml
from django.conf import settings

from cloudpivot import credentials
from cloudpivot.lazy_module import LazyModule
from clusters.backends.base import BackendError, ErrorKind
from clusters.backends.kubernetes.labels import LABEL_INSTALLATION, label_value
from clusters.models import CloudConnection

# The Kubernetes client is imported at the first call, not at start-up (cloudpivot/lazy_module.py).
k8s = LazyModule("kubernetes.client")
k8s_config = LazyModule("kubernetes.config")
k8s_exceptions = LazyModule("kubernetes.client.exceptions")
k8s_config_exceptions = LazyModule("kubernetes.config.config_exception")

DEFAULT_OPTIONS: dict[str, Any] = {
    "ttl_seconds_after_finished": 24 * 3600,  # the cluster removes finished Jobs even if CloudPivot never does
    "keep_finished_jobs": False,  # True: cleanup leaves finished Jobs to ttlSecondsAfterFinished
    "image_pull_grace_seconds": 120,  # an image that cannot be pulled fails the task after this long
    "request_timeout_seconds": 30,
    "log_interval_seconds": 5,  # copy a running pod's log at most this often (always once more at its end)
    "log_limit_bytes": 8 * 1024 * 1024,  # at most this much log per copy; the rest follows next time
    # What a task that says no `resources` gets (requests = limits), and counts against its project's quota.
    "default_resources": {"cpu": 1, "memory_mb": 1024},
    # What users may choose (clusters/backends/kubernetes/placement.py); nothing unless the admin allows it.
    "allowed_node_selectors": {},
    "allowed_tolerations": [],
}


class KubeApiError(BackendError):
    """A BackendError that remembers the HTTP status the API server answered (0: no answer)."""

    def __init__(self, message: str, *, kind: ErrorKind, status: int = 0) -> None:
        super().__init__(message, kind=kind)
        self.status = status


class KubeClient:
    """One connection's API client (built on first use) and the calls CloudPivot makes with it."""

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.namespace = connection.scope or "default"
        self.options = DEFAULT_OPTIONS | (connection.options or {})
        self.installation = label_value(settings.INSTALLATION_ID)
        self.selector = f"{LABEL_INSTALLATION}={self.installation}"
        self._client: k8s.ApiClient | None = None
        self.api_calls = 0  # requests sent by this client (benchmarks and tests read it)

    # ------------------------------------------------------------------ the SDK (for this package's modules)
    def api(self) -> k8s.ApiClient:
        if self._client is None:
            self._client = k8s.ApiClient(self._configuration())
        return self._client

    def batch(self) -> k8s.BatchV1Api:
        return k8s.BatchV1Api(self.api())

    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api())

    def networking(self) -> k8s.NetworkingV1Api:
        return k8s.NetworkingV1Api(self.api())

    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api())

    def authorization(self) -> k8s.AuthorizationV1Api:
        return k8s.AuthorizationV1Api(self.api())

    @property
    def host(self) -> str:
        return self.api().configuration.host

    def call(self, what: str, method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Call one generated API method; return its JSON as plain dicts, or raise a KubeApiError in words."""
        self.api_calls += 1
        try:
            response = method(*args, _preload_content=False, _request_timeout=self.timeout(), **kwargs)
            body = response.data
        except k8s_exceptions.ApiException as exc:
            raise classify(exc, what, self) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeApiError(
                f"cannot reach the Kubernetes API at {self.host} while {what}: {network_words(exc)}",
                kind="transient",
            ) from None
        try:
            return json.loads(body) if body else {}
        except ValueError:
            raise KubeApiError(
                f"the Kubernetes API answered something that is not JSON while {what}", kind="transient"
            ) from None

    def request(
        self,
        what: str,
        method: str,
        path: str,
        *,
        path_params: dict[str, str],
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        accept: str = "application/json",
    ) -> bytes:
        """One request by path, for what the generated methods lack (pod log `sinceTime`, KubeVirt subresources)."""
        api = self.api()
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = "application/json"
        method, url, headers, data, post = api.param_serialize(
            method=method,
            resource_path=path,
            path_params=path_params,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        self.api_calls += 1
        try:
            response = api.call_api(
                method, url, header_params=headers, body=data, post_params=post, _request_timeout=self.timeout()
            )
            response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeApiError(
                f"cannot reach the Kubernetes API while {what}: {network_words(exc)}", kind="transient"
            ) from None
        if not 200 <= response.status <= 299:
            raise classify(k8s_exceptions.ApiException(http_resp=response), what, self)
        return response.data or b""

    def timeout(self) -> tuple[float, float]:
        total = float(self.options["request_timeout_seconds"])
        return (min(5.0, total), total)

    # ------------------------------------------------------------------ plain-data calls for other apps
    def server_version(self) -> dict[str, Any]:
        return self.call("reading the server version", k8s.VersionApi(self.api()).get_code)

    def serves_api_group(self, group: str) -> bool:
        """Whether the cluster serves an API group (discovery, GET /apis): e.g. kubevirt.io where KubeVirt runs."""
        groups = self.call("discovering the served API groups", k8s.ApisApi(self.api()).get_api_versions)
        return any(entry.get("name") == group for entry in groups.get("groups") or [])

    def jobs(self, *, what: str = "listing Jobs", **params: Any) -> list[dict[str, Any]]:
        """Jobs in the namespace; `params`: label_selector, limit."""
        return self.call(what, self.batch().list_namespaced_job, self.namespace, **params).get("items") or []

    def job(self, name: str) -> dict[str, Any] | None:
        """The Job of that name, None when there is none."""
        try:
            return self.call(f"reading Job {name}", self.batch().read_namespaced_job, name, self.namespace)
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_job(self, name: str, *, uid: str) -> dict[str, Any]:
        """Delete exactly that Job (uid precondition; Background propagation: its pods follow)."""
        return self.call(
            f"deleting Job {name}",
            self.batch().delete_namespaced_job,
            name,
            self.namespace,
            propagation_policy="Background",
            body={"propagationPolicy": "Background", "preconditions": {"uid": uid}},
        )

    def pods(self, *, what: str, label_selector: str) -> list[dict[str, Any]]:
        return (
            self.call(what, self.core().list_namespaced_pod, self.namespace, label_selector=label_selector).get("items")
            or []
        )

    def objects(self, group: str, version: str, plural: str, *, what: str, **params: Any) -> list[dict[str, Any]]:
        """Custom objects (e.g. KubeVirt's) in the namespace; `params`: label_selector."""
        return (
            self.call(
                what, self.custom().list_namespaced_custom_object, group, version, self.namespace, plural, **params
            ).get("items")
            or []
        )

    def object(self, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
        """One custom object in the namespace, None when there is none."""
        try:
            return self.call(
                f"reading {plural} {name}",
                self.custom().get_namespaced_custom_object,
                group,
                version,
                self.namespace,
                plural,
                name,
            )
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise

    def create_object(self, group: str, version: str, plural: str, body: dict[str, Any], *, what: str) -> dict:
        return self.call(
            what, self.custom().create_namespaced_custom_object, group, version, self.namespace, plural, body
        )

    def patch_object(self, group: str, version: str, plural: str, name: str, patch: dict, *, what: str) -> dict:
        return self.call(
            what, self.custom().patch_namespaced_custom_object, group, version, self.namespace, plural, name, patch
        )

    def delete_object(
        self, group: str, version: str, plural: str, name: str, *, what: str, uid: str = "", propagation: str = ""
    ) -> dict:
        """Delete a custom object; with `uid`, exactly that one. `propagation`: what the garbage collector does
        with its dependents (Background by default with a uid; Orphan keeps them, with their ownerReference gone)."""
        options: dict[str, Any] = {}
        policy = propagation or ("Background" if uid else "")
        if policy or uid:
            body: dict[str, Any] = {"propagationPolicy": policy} if policy else {}
            if uid:
                body["preconditions"] = {"uid": uid}
            options = {"body": body, **({"propagation_policy": policy} if policy else {})}
        return self.call(
            what,
            self.custom().delete_namespaced_custom_object,
            group,
            version,
            self.namespace,
            plural,
            name,
            **options,
        )

    def pvc(self, name: str) -> dict[str, Any] | None:
        """The PersistentVolumeClaim of that name in the namespace, None when there is none."""
        try:
            return self.call(
                f"reading PersistentVolumeClaim {name}",
                self.core().read_namespaced_persistent_volume_claim,
                name,
                self.namespace,
            )
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise

    def put_subresource(self, group: str, version: str, plural: str, name: str, verb: str, body: dict, *, what: str):
        """PUT /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/{verb} (e.g. KubeVirt's virt-api)."""
        self.request(
            what,
            "PUT",
            f"/apis/{group}/{version}/namespaces/{{namespace}}/{plural}/{{name}}/{verb}",
            path_params={"namespace": self.namespace, "name": name},
            body=body,
        )

    def access_review(self, attributes: dict[str, str], *, what: str) -> dict[str, Any]:
        """A SelfSubjectAccessReview's status: may these credentials do that?"""
        review = self.call(
            what,
            self.authorization().create_self_subject_access_review,
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes},
            },
        )
        return review.get("status") or {}

    # ------------------------------------------------------------------ configuration
    def _configuration(self) -> k8s.Configuration:
        """Client settings from the connection. The one place a client is configured; tokens stay in memory."""
        cfg = k8s.Configuration()
        where = f"connection {self.connection.cloud_id}"
        allowed_sources_or_error(self.connection, self.options)
        mode, value = parse_credentials_ref(self.connection.credentials_ref)
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
        except (k8s_config_exceptions.ConfigException, OSError, yaml.YAMLError) as exc:
            raise BackendError(f"cannot load the Kubernetes credentials of {where}: {exc}", kind="auth") from None
        if self.options.get("insecure_skip_tls_verify"):
            cfg.verify_ssl = False
        cfg.retries = 1
        return cfg


def allowed_sources_or_error(connection: CloudConnection, options: dict[str, Any]) -> None:
    """Credentials only from the allowlisted places (cloudpivot/credentials.py), or a BackendError saying so."""
    try:
        credentials.check_connection_sources(credentials_ref=connection.credentials_ref, options=options)
    except credentials.CredentialsNotAllowed as exc:
        raise BackendError(f"connection {connection.cloud_id}: {exc.field}: {exc.message}", kind="auth") from None


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


def classify(exc: Any, what: str, client: KubeClient) -> KubeApiError:
    """An ApiException in words users understand, with the kind of error (DESIGN §4)."""
    status = int(exc.status or 0)
    message = _status_message(exc)
    cloud = client.connection.cloud_id
    where = f"namespace {client.namespace} on {cloud}"
    if status == 401:
        return KubeApiError(
            f"the Kubernetes API refused the credentials of {cloud} while {what} "
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
            f"the credentials of {cloud} may not do this ({what}; 403 Forbidden): {message}",
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


def _status_message(exc: Any) -> str:
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        message = json.loads(body or "").get("message") or ""
    except (ValueError, AttributeError):
        message = (body or "").strip()
    return (message or str(exc.reason or "")).strip()[:500]


def network_words(exc: BaseException) -> str:
    """What went wrong on the wire, in words ("connection refused"), not urllib3's wrapper class names."""
    reason = getattr(exc, "reason", None) or exc  # MaxRetryError carries the real error as .reason
    text = str(reason)
    if "Connection refused" in text or isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the API server running, and is this its address?)"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host name"
    if isinstance(reason, TimeoutError | urllib3.exceptions.TimeoutError):
        return "no answer in time"
    return text.split(": ", 1)[-1][:200] or type(exc).__name__
