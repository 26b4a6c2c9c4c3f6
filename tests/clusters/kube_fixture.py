"""A Kubernetes API server on loopback for the real `kubernetes` client: kmock's emulator made realistic.

kmock 0.8's `KubernetesEmulator` stores objects and streams watch events, but it lacks behaviour a real
API server (and its controllers) has. `RealisticKubernetes` adds it, each piece proven by
tests/clusters/test_kube_fixture.py so the backend is never tested against behaviour a real cluster lacks:

- admission: bearer-token authentication (401), RBAC by (verb, group, resource, subresource) (403, and
  SelfSubjectAccessReview answers to match), a ResourceQuota on the number of Jobs (403 "exceeded quota"),
  validation of Jobs (422), 409 AlreadyExists with a real Status body, server-set metadata (uid,
  creationTimestamp, resourceVersion) and the Job selector/pod-template labels the API server adds;
- reads: label selectors on LIST and WATCH, `timeoutSeconds` on WATCH, 404 after delete, the cluster-wide
  list of Namespaces (kmock's path parser fails on `/api/v1/namespaces`);
- controllers: the Job controller creates the Job's pod and keeps the Job's status and conditions in
  step with it (Complete, Failed/BackoffLimitExceeded, Failed/DeadlineExceeded); the garbage collector
  deletes a Job's pods on Background/Foreground deletion (Orphan keeps them, as the API's default does);
- the kubelet's part, driven by the test: pod status progressions (Pending → Running → Succeeded/Failed
  with container exit codes, OOMKilled, ImagePullBackOff, Unschedulable, Evicted) and pod logs with
  `timestamps`, `sinceTime` (passed on with second precision, as the API server does), `limitBytes`;
- metrics.k8s.io (nodes, pods) when `metrics_served` is set, otherwise not served (404), as without
  metrics-server;
- KubeVirt when `serve_kubevirt()` was called (otherwise its groups answer 404, as on a cluster without
  it): kubevirt.io (VirtualMachines, VirtualMachineInstances), snapshot.kubevirt.io (snapshots, restores),
  cdi.kubevirt.io (DataVolumes) in API discovery and storage; virt-api's subresources (restart, pause,
  unpause) with its refusals and the state change requests it writes; the VM controller's finalizer,
  the DataVolumes it makes from dataVolumeTemplates and its re-adoption of any unowned DataVolume its
  template names (until the VM is being deleted); the garbage collector orphaning a deleted VM's
  dependents on propagationPolicy Orphan; the KubeVirt CR (version, feature gates); the restore
  webhook's "not stopped" refusal. The
  rest of KubeVirt's controllers (status transitions, snapshot readiness, restores) are driven by the test.

The server runs in its own thread and event loop; the sync client under test talks HTTP to it. Test
helpers (`KubeCluster`, tests/clusters/kube_cluster.py) act as the kubelet would: through the API, with the
controllers' token. KubeVirt's part is tests/clusters/kube_kubevirt.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import re
import uuid
import warnings
from collections.abc import AsyncIterator
from typing import Any

import aiohttp.web
import kmock
from kmock._internal import parsing as kmock_parsing

from tests.clusters.kube_api import (
    ALL_PERMISSIONS,
    DATA_VOLUMES,
    JOBS,
    KUBEVIRT_GROUPS,
    PODS,
    REVIEWS,
    SYSTEM_TOKEN,
    VERBS,
    VIRT_API,
    VM_RESTORES,
    VMS,
    nano_text,
    now_text,
    status_error,
)
from tests.clusters.kube_kubevirt import KubeVirtApi


def _parse_path(path: str, _kmock_parse=kmock_parsing.parse_path) -> kmock_parsing.ParsedPath:
    """kmock 0.8 reads `/api/v1/namespaces` as a namespace without a name and fails (a ValueError, served as a
    500): the cluster-wide list (and create) of Namespace objects is parsed as what it is."""
    if path.strip("/") == "api/v1/namespaces":
        return kmock_parsing.ParsedPath(group="", version="v1", plural="namespaces")
    return _kmock_parse(path)


kmock_parsing.parse_path = _parse_path  # kmock's Request parser looks it up on the module at each request


class RealisticKubernetes(KubeVirtApi, kmock.KubernetesEmulator):
    """kmock's emulator plus admission, selectors, controllers, logs and metrics of a real cluster."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.token: str | None = None  # the bearer token a client must present (None: anonymous allowed)
        self.permissions: set[tuple[str, str, str, str]] | None = ALL_PERMISSIONS
        self.job_quota: int | None = None  # at most this many Jobs per namespace (a ResourceQuota)
        self.metrics_served = False
        self.kubevirt_served = False
        self.virt_api_calls: list[tuple[str, str, str, dict[str, Any]]] = []  # (plural, name, verb, body)
        self.vm_delete_policies: list[tuple[str, str]] = []  # (VM name, propagationPolicy) of each VM delete
        self.node_metrics: list[dict[str, Any]] = []
        self.pod_metrics: dict[str, dict[str, str]] = {}  # pod name -> usage
        self.logs: dict[tuple[str, str], list[tuple[int, str, bytes]]] = {}  # (ns, pod) -> [(ns_time, stamp, line)]
        self.client_requests: list[kmock.Request] = []  # requests from clients (not from the controllers)
        self._versions = itertools.count(1000)
        self._names = itertools.count(1)
        with warnings.catch_warnings():  # kmock 0.8 uses the deprecated importlib.resources.read_binary
            warnings.simplefilter("ignore", DeprecationWarning)
            self.resources.load_bundled()  # the built-in resources of a k3s cluster: empty lists, not 404s
        # The client's VersionApi asks for /version/ (go-restful's route), kmock serves only /version.
        self["get /version/"] << self._serve_server_version
        self["get /apis/"] << self._serve_apis  # the client's ApisApi asks for /apis/ (API group discovery)
        # Reads: label selectors and watch timeouts (kmock's own list/watch ignore both).
        self[kmock.action.LIST] << self._serve_selected_list
        self[kmock.action.WATCH] << self._serve_selected_watch
        self["get", kmock.subresource("log")] << self._serve_log
        # Above the LIST reaction, which would otherwise answer these paths from the (empty) object store.
        (self**10)["get", re.compile(r"^/apis/metrics\.k8s\.io/v1beta1/.*")] << self._serve_metrics

    # ------------------------------------------------------------------ the request path
    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        # kmock matches each request against every request it ever recorded; keep the recent ones only,
        # so thousands of requests (benchmarks) stay fast. Tests count client requests in client_requests.
        del self._requests[:-20]
        system = self._authenticate(request)
        if not system:
            self.client_requests.append(request)
            self._authorize(request)
        if request.resource is not None and (request.resource.group or "") in KUBEVIRT_GROUPS:
            if not self.kubevirt_served:
                raise status_error(404, "NotFound", "the server could not find the requested resource")
            if request.resource.group == VIRT_API and request.name:
                return aiohttp.web.json_response(await self._virt_api(request, system), status=202)
        if request.resource == REVIEWS and request.action == kmock.action.CREATE:
            return aiohttp.web.json_response(self._review(request), status=201)  # reviews are not stored
        if request.resource is not None and request.action == kmock.action.CREATE:
            self._admit_create(request)
        elif request.resource is not None and request.action == kmock.action.UPDATE and isinstance(request.data, dict):
            request.data.setdefault("metadata", {})["resourceVersion"] = str(next(self._versions))
        if request.resource is not None and request.action == kmock.action.DELETE:
            self._check_preconditions(request)
        deleting = request.resource in (JOBS, VMS) and request.action == kmock.action.DELETE
        before = self._get(request.resource, request.namespace, request.name) if deleting else None
        response = await super()._handle(request)
        if 200 <= response.status < 300:
            await self._controllers(request, before)
        return response

    def _authenticate(self, request: kmock.Request) -> bool:
        header = request.headers.get("Authorization") or request.headers.get("authorization") or ""
        if header == f"Bearer {SYSTEM_TOKEN}":
            return True
        if self.token is not None and header != f"Bearer {self.token}":
            raise status_error(401, "Unauthorized", "Unauthorized")
        return False

    def _authorize(self, request: kmock.Request) -> None:
        if self.permissions is None or request.resource is None or request.resource == REVIEWS:
            return
        verb = VERBS.get(request.action)
        if verb is None:
            return
        group, plural = request.resource.group or "", request.resource.plural
        if (verb, group, plural, request.subresource or "") not in self.permissions:
            what = f"{plural}/{request.subresource}" if request.subresource else plural
            scope = f' in the namespace "{request.namespace}"' if request.namespace else " at the cluster scope"
            raise status_error(
                403,
                "Forbidden",
                f'{plural}{"." + group if group else ""} is forbidden: User "system:serviceaccount:cloudpivot:'
                f'runner" cannot {verb} resource "{what}" in API group "{group}"{scope}',
                {"kind": plural, "group": group},
            )

    def _review(self, request: kmock.Request) -> dict[str, Any]:
        attrs = ((request.data or {}).get("spec") or {}).get("resourceAttributes") or {}
        key = (attrs.get("verb", ""), attrs.get("group", ""), attrs.get("resource", ""), attrs.get("subresource", ""))
        allowed = self.permissions is None or key in self.permissions
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": None},
            "spec": request.data.get("spec"),
            "status": {"allowed": allowed, **({} if allowed else {"reason": "no RBAC rule allows it"})},
        }

    def _admit_create(self, request: kmock.Request) -> None:
        """What the API server does before storing: quota, validation, conflict, server-set fields."""
        obj = request.data
        if not isinstance(obj, dict):
            raise status_error(400, "BadRequest", "the request body is not a JSON object")
        metadata = obj.setdefault("metadata", {})
        namespace = request.namespace or metadata.get("namespace")
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = f"{metadata['generateName']}{next(self._names):05d}"
        name = metadata.get("name")
        plural, group = request.resource.plural, request.resource.group
        qualified = f"{plural}.{group}" if group else plural
        if request.resource == JOBS:
            self._validate_job(obj, name)
            live = [k for k, o in self.objects.items() if k[0] == JOBS and k[1] == namespace and not o.deleted]
            if self.job_quota is not None and len(live) >= self.job_quota:
                raise status_error(
                    403,
                    "Forbidden",
                    f'jobs.batch "{name}" is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1, '
                    f"used: count/jobs.batch={len(live)}, limited: count/jobs.batch={self.job_quota}",
                )
        existing = self._get(request.resource, namespace, name)
        if existing is not None:
            raise status_error(
                409,
                "AlreadyExists",
                f'{qualified} "{name}" already exists',
                {"name": name, "group": group, "kind": plural},
            )
        uid = str(uuid.uuid4())
        metadata.update(
            namespace=namespace,
            uid=uid,
            creationTimestamp=now_text(),
            resourceVersion=str(next(self._versions)),
            generation=1,
        )
        if request.resource == JOBS:
            template_labels = obj["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})
            extra = {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": name,
                "controller-uid": uid,
                "job-name": name,
            }
            template_labels.update(extra)
            obj["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            obj["spec"].setdefault("completions", 1)
            obj["spec"].setdefault("parallelism", 1)
            obj.setdefault("status", {})
        if request.resource == PODS:
            obj.setdefault("status", {"phase": "Pending", "qosClass": "BestEffort"})
        if request.resource == VM_RESTORES:
            self._admit_restore(obj, namespace)

    def _check_preconditions(self, request: kmock.Request) -> None:
        """DeleteOptions.preconditions.uid: delete only the object with that UID, else 409 Conflict."""
        wanted = (((request.data or {}) if isinstance(request.data, dict) else {}).get("preconditions") or {}).get(
            "uid"
        )
        existing = self._get(request.resource, request.namespace, request.name)
        if wanted and existing is not None and existing["metadata"].get("uid") != wanted:
            raise status_error(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {wanted}, "
                f"UID in object meta: {existing['metadata'].get('uid')}",
                {"name": request.name, "kind": request.resource.plural},
            )

    def _validate_job(self, obj: dict[str, Any], name: str | None) -> None:
        causes = []
        if not name or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
            causes.append(("metadata.name", "a lowercase RFC 1123 label must consist of lower case alphanumerics"))
        pod_spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        if pod_spec.get("restartPolicy") not in ("Never", "OnFailure"):
            causes.append(("spec.template.spec.restartPolicy", 'Required value: valid values: "OnFailure", "Never"'))
        for i, container in enumerate(pod_spec.get("containers") or []):
            if not container.get("image"):
                causes.append((f"spec.template.spec.containers[{i}].image", "Required value"))
        if not pod_spec.get("containers"):
            causes.append(("spec.template.spec.containers", "Required value"))
        if causes:
            raise status_error(
                422,
                "Invalid",
                f'Job.batch "{name}" is invalid: ' + ", ".join(f"{field}: {why}" for field, why in causes),
                {
                    "name": name,
                    "group": "batch",
                    "kind": "Job",
                    "causes": [{"field": f, "message": m} for f, m in causes],
                },
            )

    def _get(self, resource: kmock.resource, namespace: str | None, name: str | None) -> dict[str, Any] | None:
        key = (resource, namespace, name)
        if name is None or key not in self.objects or self.objects[key].deleted:
            return None
        return self.objects[key].raw

    # ------------------------------------------------------------------ reads
    def _selected(self, request: kmock.Request, obj: dict[str, Any], namespace: str | None) -> bool:
        if request.namespace is not None and namespace != request.namespace:
            return False
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if not label_selector_matches(request.params.get("labelSelector", ""), labels):
            return False
        return field_selector_matches(request.params.get("fieldSelector", ""), obj)

    async def _serve_selected_list(self, request: kmock.Request) -> dict[str, Any]:
        if request.resource not in set(self._get_resources()):
            raise kmock.KubernetesResourceNotFoundError()
        async with self._lock:
            items = [
                obj.raw
                for (resource, namespace, _), obj in self.objects.items()
                if resource == request.resource and not obj.deleted and self._selected(request, obj.raw, namespace)
            ]
        kind = (request.resource.plural or "").rstrip("s").capitalize()
        return {
            "apiVersion": f"{request.resource.group}/{request.resource.version}".lstrip("/"),
            "kind": f"{kind}List",
            "metadata": {"resourceVersion": str(next(self._versions))},
            "items": items,
        }

    async def _serve_selected_watch(self, request: kmock.Request) -> AsyncIterator[Any]:
        """Events of matching objects; initial ADDED events unless a resourceVersion says where to start."""
        yield b""  # send the headers now, as kmock's own watch does
        timeout = float(request.params.get("timeoutSeconds") or 3600)
        deadline = asyncio.get_running_loop().time() + timeout
        bus = self._buses[request.resource]
        marker = await bus.mark()
        try:
            if request.params.get("resourceVersion", "") in ("", "0"):
                async with self._lock:
                    existing = [
                        obj.raw
                        for (resource, namespace, _), obj in self.objects.items()
                        if resource == request.resource
                        and not obj.deleted
                        and self._selected(request, obj.raw, namespace)
                    ]
                for obj in existing:
                    yield {"type": "ADDED", "object": obj}
            while True:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    return
                try:
                    event = await asyncio.wait_for(bus.get(since=marker), remaining)
                except TimeoutError:
                    return
                obj = event.get("object") or {}
                if self._selected(request, obj, (obj.get("metadata") or {}).get("namespace")):
                    yield event
        finally:
            await bus.unmark(marker)

    async def _serve_log(self, request: kmock.Request) -> kmock.Response:
        pod = self._get(PODS, request.namespace, request.name)
        if pod is None:
            raise status_error(404, "NotFound", f'pods "{request.name}" not found')
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        state = (statuses[0].get("state") or {}) if statuses else {}
        if not ({"running", "terminated"} & set(state)):
            waiting = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
            container = request.params.get("container") or "main"
            raise status_error(
                400, "BadRequest", f'container "{container}" in pod "{request.name}" is waiting to start: {waiting}'
            )
        lines = self.logs.get((request.namespace, request.name), [])
        since = request.params.get("sinceTime")
        if since:
            # The API server hands sinceTime to the kubelet as a metav1.Time: whole seconds.
            cutoff = int(dt.datetime.fromisoformat(since.replace("Z", "+00:00")).timestamp()) * 1_000_000_000
            lines = [line for line in lines if line[0] >= cutoff]
        if request.params.get("tailLines"):
            lines = lines[-int(request.params["tailLines"]) :]
        stamps = request.params.get("timestamps") == "true"
        body = b"".join((stamp.encode() + b" " if stamps else b"") + text for _, stamp, text in lines)
        if request.params.get("limitBytes"):
            body = body[: int(request.params["limitBytes"])]
        return kmock.Response(payload=body, headers={"Content-Type": "text/plain; charset=utf-8"})

    async def _serve_metrics(self, request: kmock.Request) -> dict[str, Any]:
        if not self.metrics_served:
            raise status_error(404, "NotFound", "the server could not find the requested resource")
        if request.resource.plural == "nodes":
            items = [
                {"metadata": {"name": m["name"]}, "usage": m["usage"], "window": "10s", "timestamp": now_text()}
                for m in self.node_metrics
            ]
            return {"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "items": items}
        items = []
        for (resource, namespace, name), obj in self.objects.items():
            if resource != PODS or obj.deleted or name not in self.pod_metrics:
                continue
            if self._selected(request, obj.raw, namespace):
                items.append(
                    {
                        "metadata": {"name": name, "namespace": namespace, "labels": obj.raw["metadata"].get("labels")},
                        "containers": [{"name": "main", "usage": self.pod_metrics[name]}],
                        "window": "10s",
                        "timestamp": now_text(),
                    }
                )
        return {"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "items": items}

    async def _controllers(self, request: kmock.Request, before: dict[str, Any] | None) -> None:
        if request.resource == VMS and request.action == kmock.action.CREATE:
            await self._vm_controller_start(request.data)
        if request.resource == VMS and request.action == kmock.action.DELETE and before is not None:
            await self._garbage_collector_vm_deleted(request, before)
        if request.resource in (VMS, DATA_VOLUMES) and request.action in (kmock.action.CREATE, kmock.action.UPDATE):
            await self._vm_controller_adopt(request.namespace)
        if request.resource == JOBS and request.action == kmock.action.CREATE:
            await self._job_controller_start(request.data)
        elif request.resource == PODS and request.action in (kmock.action.UPDATE, kmock.action.DELETE):
            await self._job_controller_sync(
                request.namespace, request.name, deleted=request.action == kmock.action.DELETE
            )
        elif request.resource == JOBS and request.action == kmock.action.DELETE and before is not None:
            policy = request.params.get("propagationPolicy") or (request.data or {}).get("propagationPolicy")
            if policy in ("Background", "Foreground"):  # the API's default for batch/v1 Jobs is to orphan the pods
                for pod in self.pods_of(request.namespace, before["metadata"]["name"]):
                    await self.system(
                        "DELETE", f"/api/v1/namespaces/{request.namespace}/pods/{pod['metadata']['name']}"
                    )

    async def _job_controller_start(self, job: dict[str, Any]) -> None:
        metadata = job["metadata"]
        template = job["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{metadata['name']}-{uuid.uuid4().hex[:5]}",
                "namespace": metadata["namespace"],
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": metadata["name"],
                        "uid": metadata["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": template["spec"],
        }
        await self.system("POST", f"/api/v1/namespaces/{metadata['namespace']}/pods", pod)
        await self.system(
            "PATCH",
            f"/apis/batch/v1/namespaces/{metadata['namespace']}/jobs/{metadata['name']}/status",
            {"status": {"startTime": now_text(), "active": 1}},
        )

    async def _job_controller_sync(self, namespace: str, pod_name: str, *, deleted: bool) -> None:
        """Keep the owning Job's status in step with its pod (backoffLimit 0: one failure fails the Job)."""
        history = self.objects[PODS, namespace, pod_name] if (PODS, namespace, pod_name) in self.objects else None
        if history is None:
            return
        pod = history.last.raw
        job_name = (pod["metadata"].get("labels") or {}).get("job-name")
        job = self._get(JOBS, namespace, job_name)
        if job is None or _finished(job):
            return
        phase = (pod.get("status") or {}).get("phase")
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{job_name}/status"
        if phase == "Succeeded":
            await self.system("PATCH", path, job_status(active=0, succeeded=1, condition=("Complete", "", "")))
        elif phase == "Failed" or deleted:
            await self.system(
                "PATCH",
                path,
                job_status(
                    active=0,
                    failed=1,
                    condition=("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
                ),
            )

    # ------------------------------------------------------------------ helpers for the controllers and tests
    async def system(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request through the API, authenticated as the cluster's own controllers."""
        headers = {"Authorization": f"Bearer {SYSTEM_TOKEN}"}
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        response = await self.request(method, path, json=body, headers=headers)
        async with response:
            text = await response.text()
            if response.status >= 300:
                raise AssertionError(f"{method} {path} answered {response.status}: {text[:300]}")
            return json.loads(text) if text else None

    def pods_of(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        return [
            obj.raw
            for (resource, ns, _), obj in self.objects.items()
            if resource == PODS
            and ns == namespace
            and not obj.deleted
            and (obj.raw["metadata"].get("labels") or {}).get("job-name") == job_name
        ]

    def write_log(self, namespace: str, pod: str, text: bytes) -> None:
        """Append lines as the container runtime would: each with its own nanosecond timestamp."""
        entries = self.logs.setdefault((namespace, pod), [])
        for line in text.splitlines(keepends=True):
            moment = dt.datetime.now(dt.UTC)
            epoch_ns = int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
            if entries and epoch_ns <= entries[-1][0]:
                epoch_ns = entries[-1][0] + 1  # strictly increasing, as the runtime's clock is
            seconds = dt.datetime.fromtimestamp(epoch_ns // 1_000_000_000, dt.UTC)
            entries.append((epoch_ns, nano_text(seconds, epoch_ns % 1_000_000_000), line))


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def job_status(*, active: int, condition: tuple[str, str, str], succeeded: int = 0, failed: int = 0) -> dict[str, Any]:
    kind, reason, message = condition
    status: dict[str, Any] = {
        "active": active,
        "succeeded": succeeded,
        "failed": failed,
        "conditions": [
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": now_text(),
                "lastProbeTime": now_text(),
            }
        ],
    }
    if kind == "Complete":
        status["completionTime"] = now_text()
    return {"status": status}


# ---------------------------------------------------------------------- selectors
_REQUIREMENT = re.compile(
    r"^\s*(?P<neg>!)?(?P<key>[A-Za-z0-9._/-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9._-]*)|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


def _split_selector(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def label_selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Kubernetes label selector semantics: =, ==, !=, in, notin, key, !key; all requirements must hold."""
    for requirement in _split_selector(selector or ""):
        match = _REQUIREMENT.match(requirement)
        if not match:
            raise status_error(400, "BadRequest", f"unable to parse requirement: {requirement!r}")
        key = match["key"]
        if match["neg"]:
            if key in labels:
                return False
        elif match["op"] in ("=", "=="):
            if labels.get(key) != match["value"]:
                return False
        elif match["op"] == "!=":
            if labels.get(key) == match["value"]:
                return False
        elif match["setop"]:
            values = {v.strip() for v in match["values"].split(",") if v.strip()}
            if match["setop"] == "in" and labels.get(key) not in values:
                return False
            if match["setop"] == "notin" and key in labels and labels[key] in values:
                return False
        elif key not in labels:
            return False
    return True


def field_selector_matches(selector: str, obj: dict[str, Any]) -> bool:
    for requirement in filter(None, (selector or "").split(",")):
        key, op, value = re.match(r"^([^=!]+)(==|=|!=)(.*)$", requirement).groups()
        actual: Any = obj
        for part in key.split("."):
            actual = (actual or {}).get(part) if isinstance(actual, dict) else None
        if (str(actual or "") == value) != (op != "!="):
            return False
    return True
