"""`KubeCluster`: the realistic kmock API server (kube_fixture.py) on 127.0.0.1 in a thread, and the kubelet's part."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from typing import Any

import kmock

from tests.clusters.kube_api import (
    DATA_VOLUMES,
    JOBS,
    KUBEVIRTS,
    VM_RESTORES,
    VM_SNAPSHOTS,
    VMIS,
    VMS,
    now_text,
)
from tests.clusters.kube_fixture import RealisticKubernetes, job_status


# ---------------------------------------------------------------------- the server in a thread, for sync tests
class KubeCluster:
    """Runs `RealisticKubernetes` on 127.0.0.1 in a thread; methods act on it like a cluster would."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the kmock server did not start")
        if self._error:
            raise self._error

    def _run(self) -> None:
        async def serve() -> None:
            try:
                async with RealisticKubernetes() as api, kmock.Server(api, host="127.0.0.1") as server:
                    self.api, self.url = api, str(server.url).rstrip("/")
                    self.loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
                    self._ready.set()
                    await self._stop.wait()
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                self._error = exc
                self._ready.set()

        asyncio.run(serve())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` (sync or returning an awaitable) on the server's loop, so it never races a request."""

        async def wrapper() -> Any:
            result = fn()
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(30)

    # ------------------------------------------------------------------ setup
    def configure(self, **settings: Any) -> None:
        def apply() -> None:
            for key, value in settings.items():
                setattr(self.api, key, value)

        self.call(apply)

    def put(self, resource: kmock.resource, namespace: str | None, obj: dict[str, Any]) -> None:
        """Seed an object (a node, a PVC, a namespace) as if an administrator had created it."""
        path = _collection_path(resource, namespace)
        self.call(lambda: self.api.system("POST", path, obj))

    def seed(self, items: list[tuple[kmock.resource, str | None, dict[str, Any]]]) -> None:
        """Store many objects at once without requests (benchmarks): as they would be after creation."""

        def store() -> None:
            for resource, namespace, obj in items:
                metadata = obj["metadata"]
                metadata.setdefault("uid", str(uuid.uuid4()))
                metadata.setdefault("creationTimestamp", now_text())
                metadata.setdefault("namespace", namespace)
                self.api.objects[resource, namespace, metadata["name"]] = obj

        self.call(store)

    # ------------------------------------------------------------------ reading
    def objects(self, resource: kmock.resource, namespace: str = "tasks") -> dict[str, dict[str, Any]]:
        def read() -> dict[str, dict[str, Any]]:
            return {
                key[2]: obj.raw
                for key, obj in self.api.objects.items()
                if key[0] == resource and key[1] == namespace and not obj.deleted
            }

        return self.call(read)

    def jobs(self, namespace: str = "tasks") -> dict[str, dict[str, Any]]:
        return self.objects(JOBS, namespace)

    def pod(self, job: str, namespace: str = "tasks") -> dict[str, Any]:
        pods = self.call(lambda: self.api.pods_of(namespace, job))
        assert len(pods) == 1, f"expected one pod of {job}, found {len(pods)}"
        return pods[0]

    def client_requests(self) -> int:
        return self.call(lambda: len(self.api.client_requests))

    def job_creations(self) -> list[str]:
        """The names of the Jobs clients asked the API server to create, in order (a 409 included)."""
        requests = self.call(lambda: list(self.api.client_requests))
        return [
            (r.data or {}).get("metadata", {}).get("name", "?")
            for r in requests
            if r.method == "POST" and r.resource is not None and r.resource.plural == "jobs"
        ]

    # ------------------------------------------------------------------ the kubelet's part
    def set_pod_status(self, job: str, status: dict[str, Any], namespace: str = "tasks") -> None:
        name = self.pod(job, namespace)["metadata"]["name"]
        self.call(
            lambda: self.api.system("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": status})
        )

    def schedule(self, job: str, node: str = "node-1") -> None:
        name = self.pod(job)["metadata"]["name"]
        self.call(
            lambda: self.api.system("PATCH", f"/api/v1/namespaces/tasks/pods/{name}", {"spec": {"nodeName": node}})
        )
        self.set_pod_status(
            job,
            {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now_text()}],
                "containerStatuses": [container_status(waiting=("ContainerCreating", ""))],
            },
        )

    def unschedulable(self, job: str, message: str = "0/3 nodes are available: 3 Insufficient cpu.") -> None:
        self.set_pod_status(
            job,
            {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
                ],
            },
        )

    def image_pull_backoff(self, job: str, reason: str = "ImagePullBackOff") -> None:
        image = self.pod(job)["spec"]["containers"][0]["image"]
        self.set_pod_status(
            job,
            {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [container_status(waiting=(reason, f'Back-off pulling image "{image}"'))],
            },
        )

    def run(self, job: str) -> None:
        self.set_pod_status(
            job,
            {
                "phase": "Running",
                "startTime": now_text(),
                "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                "containerStatuses": [container_status(running=True)],
            },
        )

    def finish(self, job: str, exit_code: int = 0, reason: str | None = None) -> None:
        reason = reason or ("Completed" if exit_code == 0 else "Error")
        self.set_pod_status(
            job,
            {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
                "containerStatuses": [container_status(terminated=(exit_code, reason))],
            },
        )

    def evict(self, job: str) -> None:
        self.set_pod_status(
            job,
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.",
                "containerStatuses": [container_status(terminated=(137, "ContainerStatusUnknown"))],
            },
        )

    def preempt(self, job: str) -> None:
        """What the scheduler leaves of a pod it preempted for a higher-priority one (Kubernetes 1.26+)."""
        self.set_pod_status(
            job,
            {
                "phase": "Failed",
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": "Preempted in order to admit critical pod",
                    },
                ],
                "containerStatuses": [container_status(terminated=(137, "Error"))],
            },
        )

    def expire_deadline(self, job: str, namespace: str = "tasks") -> None:
        """What the Job controller does at activeDeadlineSeconds: fail the Job, delete its running pods."""

        async def expire() -> None:
            status = job_status(
                active=0,
                failed=1,
                condition=("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"),
            )
            await self.api.system("PATCH", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}/status", status)
            for pod in self.api.pods_of(namespace, job):
                await self.api.system("DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}")

        self.call(expire)

    def delete_pod(self, job: str, namespace: str = "tasks") -> None:
        name = self.pod(job, namespace)["metadata"]["name"]
        self.call(lambda: self.api.system("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}"))

    def log(self, job: str, text: str | bytes, namespace: str = "tasks") -> None:
        name = self.pod(job, namespace)["metadata"]["name"]
        data = text.encode() if isinstance(text, str) else text
        self.call(lambda: self.api.write_log(namespace, name, data))

    # ------------------------------------------------------------------ KubeVirt's controllers, driven by the test
    def serve_kubevirt(self) -> None:
        self.call(self.api.serve_kubevirt)

    def vm(self, name: str, namespace: str = "tasks") -> dict[str, Any] | None:
        return self.objects(VMS, namespace).get(name)

    def vmi(self, name: str, namespace: str = "tasks") -> dict[str, Any] | None:
        return self.objects(VMIS, namespace).get(name)

    def virt_api_calls(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        return self.call(lambda: list(self.api.virt_api_calls))

    def _vm_path(self, name: str, namespace: str, plural: str = "virtualmachines") -> str:
        return f"/apis/kubevirt.io/v1/namespaces/{namespace}/{plural}/{name}"

    def vm_status(self, name: str, printable: str, namespace: str = "tasks", **extra: Any) -> None:
        """The VM controller writes the VM's status (None values remove a field, as a merge patch does)."""
        status = {"printableStatus": printable, "ready": printable == "Running", **extra}
        self.call(lambda: self.api.system("PATCH", self._vm_path(name, namespace) + "/status", {"status": status}))

    def vm_running(self, name: str, namespace: str = "tasks") -> dict[str, Any]:
        """The VMI is up (virt-handler) and the VM shows Running (VM controller); pending requests consumed."""

        async def run() -> dict[str, Any]:
            vmi = self.api._get(VMIS, namespace, name)
            if vmi is None:  # the VM controller makes the VMI from the VM's template (its labels too)
                template = (self.api._get(VMS, namespace, name) or {}).get("spec", {}).get("template") or {}
                labels = (template.get("metadata") or {}).get("labels") or {}
                vmi = await self.api.system(
                    "POST",
                    f"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances",
                    {
                        "apiVersion": "kubevirt.io/v1",
                        "kind": "VirtualMachineInstance",
                        "metadata": {"name": name, "labels": dict(labels)},
                    },
                )
            await self.api.system(
                "PATCH",
                self._vm_path(name, namespace, "virtualmachineinstances") + "/status",
                {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            )
            await self.api.system(
                "PATCH",
                self._vm_path(name, namespace) + "/status",
                {
                    "status": {
                        "printableStatus": "Running",
                        "ready": True,
                        "created": True,
                        "stateChangeRequests": None,
                        "conditions": [{"type": "Ready", "status": "True"}],
                    }
                },
            )
            return self.api._get(VMIS, namespace, name)

        return self.call(run)

    def vm_stopped(self, name: str, namespace: str = "tasks") -> None:
        """The VMI is gone and the VM shows Stopped."""

        async def stop() -> None:
            if self.api._get(VMIS, namespace, name) is not None:
                await self.api.system("DELETE", self._vm_path(name, namespace, "virtualmachineinstances"))
            await self.api.system(
                "PATCH",
                self._vm_path(name, namespace) + "/status",
                {
                    "status": {
                        "printableStatus": "Stopped",
                        "ready": False,
                        "created": False,
                        "stateChangeRequests": None,
                        "conditions": [{"type": "Ready", "status": "False", "reason": "VMINotExists"}],
                    }
                },
            )

        self.call(stop)

    def guest_shutdown(self, name: str, namespace: str = "tasks") -> None:
        """The guest powers itself off: virt-handler marks the VMI Succeeded, then the VM controller acts on the
        runStrategy as KubeVirt's does: Always boots a new VMI at once; RerunOnFailure and Manual leave the
        Succeeded VMI and show the VM Stopped (Halted would already have had no VMI)."""
        strategy = (self.vm(name, namespace) or {}).get("spec", {}).get("runStrategy")
        self._patch(
            (
                self._vm_path(name, namespace, "virtualmachineinstances") + "/status",
                {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]},
            )
        )
        if strategy == "Always":
            self.call(lambda: self.api.system("DELETE", self._vm_path(name, namespace, "virtualmachineinstances")))
            self.vm_running(name, namespace)
            return
        self.vm_status(
            name,
            "Stopped",
            namespace,
            created=True,
            conditions=[{"type": "Ready", "status": "False", "reason": "VMIConditionMissing"}],
        )

    def kubevirt_cr(self, version: str = "v1.5.2", feature_gates: tuple[str, ...] = ("Snapshot",)) -> None:
        """The KubeVirt CR the operator keeps (namespace kubevirt): the deployed version and the feature gates
        (an administrator's edit of it is played as a replacement)."""
        if "kubevirt" in self.objects(KUBEVIRTS, "kubevirt"):
            path = "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt"
            self.call(lambda: self.api.system("DELETE", path))
        self.put(
            KUBEVIRTS,
            "kubevirt",
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "KubeVirt",
                "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
                "spec": {"configuration": {"developerConfiguration": {"featureGates": list(feature_gates)}}},
                "status": {"phase": "Deployed", "observedKubeVirtVersion": version, "targetKubeVirtVersion": version},
            },
        )

    def vm_delete_policies(self) -> list[tuple[str, str]]:
        return self.call(lambda: list(self.api.vm_delete_policies))

    def vm_restarted(self, name: str, namespace: str = "tasks") -> dict[str, Any]:
        """The VM controller acts on virt-api's Stop+Start requests: the old VMI goes, a new one runs."""
        old = self.vmi(name, namespace)
        assert self.vm(name, namespace)["status"].get("stateChangeRequests"), "nothing asked for a restart"
        if old is not None:
            self.call(lambda: self.api.system("DELETE", self._vm_path(name, namespace, "virtualmachineinstances")))
        return self.vm_running(name, namespace)

    def guest_agent_connected(self, name: str, namespace: str = "tasks") -> None:
        """The guest booted far enough for qemu-guest-agent to answer: virt-handler adds the VMI's
        AgentConnected condition (next to Ready, as KubeVirt's own VMI status shows them)."""
        vmi = self.vmi(name, namespace)
        assert vmi is not None and vmi["status"].get("phase") == "Running", "no running VMI to connect to"
        conditions = [c for c in vmi["status"].get("conditions") or [] if c.get("type") != "AgentConnected"]
        conditions.append({"type": "AgentConnected", "status": "True", "lastProbeTime": None})
        self._patch((self._vm_path(name, namespace, "virtualmachineinstances") + "/status", {"conditions": conditions}))

    def vm_paused(self, name: str, paused: bool = True, namespace: str = "tasks") -> None:
        """virt-handler paused (or unpaused) the domain: the VMI's Paused condition and the VM's status."""
        conditions = [{"type": "Ready", "status": "True"}]
        if paused:
            conditions.append({"type": "Paused", "status": "True", "reason": "PausedByUser"})

        async def apply() -> None:
            await self.api.system(
                "PATCH",
                self._vm_path(name, namespace, "virtualmachineinstances") + "/status",
                {"status": {"conditions": conditions}},
            )
            await self.api.system(
                "PATCH",
                self._vm_path(name, namespace) + "/status",
                {"status": {"printableStatus": "Paused" if paused else "Running", "conditions": conditions}},
            )

        self.call(apply)

    def snapshot_progress(self, snapshot: str, namespace: str = "tasks") -> None:
        """The snapshot controller starts: phase InProgress, the VM's snapshotInProgress set."""
        vm = self.objects(VM_SNAPSHOTS, namespace)[snapshot]["spec"]["source"]["name"]
        self._patch(
            (
                _snapshot_api_path("virtualmachinesnapshots", snapshot, namespace),
                {"phase": "InProgress", "readyToUse": False},
            ),
            (self._vm_path(vm, namespace) + "/status", {"snapshotInProgress": snapshot}),
        )

    def snapshot_ready(self, snapshot: str, namespace: str = "tasks") -> None:
        snap = self.objects(VM_SNAPSHOTS, namespace)[snapshot]
        ready = {
            "phase": "Succeeded",
            "readyToUse": True,
            "creationTime": now_text(),
            "virtualMachineSnapshotContentName": f"vmsnapshot-content-{snap['metadata']['uid']}",
        }
        self._patch(
            (_snapshot_api_path("virtualmachinesnapshots", snapshot, namespace), ready),
            (self._vm_path(snap["spec"]["source"]["name"], namespace) + "/status", {"snapshotInProgress": None}),
        )

    def restore_progress(self, restore: str, namespace: str = "tasks") -> None:
        """The restore controller starts: the VM's restoreInProgress and lastRestoreUID annotation set."""
        obj = self.objects(VM_RESTORES, namespace)[restore]
        vm = obj["spec"]["target"]["name"]
        annotation = f"{restore}-{obj['metadata']['uid']}"

        async def apply() -> None:
            await self.api.system(
                "PATCH",
                self._vm_path(vm, namespace),
                {"metadata": {"annotations": {"restore.kubevirt.io/lastRestoreUID": annotation}}},
            )

        self.call(apply)
        self._patch((self._vm_path(vm, namespace) + "/status", {"restoreInProgress": restore}))

    def restore_done(self, restore: str, namespace: str = "tasks") -> None:
        vm = self.objects(VM_RESTORES, namespace)[restore]["spec"]["target"]["name"]
        self._patch(
            (
                _snapshot_api_path("virtualmachinerestores", restore, namespace),
                {"complete": True, "restoreTime": now_text()},
            ),
            (self._vm_path(vm, namespace) + "/status", {"restoreInProgress": None}),
        )

    def _patch(self, *statuses: tuple[str, dict[str, Any]]) -> None:
        """PATCH each (status path, status) in order, as the KubeVirt controllers would."""

        async def apply() -> None:
            for path, status in statuses:
                await self.api.system("PATCH", path, {"status": status})

        self.call(apply)

    def vm_deletion_finished(self, name: str, namespace: str = "tasks") -> None:
        """The VM controller's finalizer: the VMI is stopped, the finalizer removed; the garbage collector
        then deletes what the VM still owns (its DataVolumes, unless released)."""
        uid = self.vm(name, namespace)["metadata"]["uid"]

        async def finish() -> None:
            if self.api._get(VMIS, namespace, name) is not None:
                await self.api.system("DELETE", self._vm_path(name, namespace, "virtualmachineinstances"))
            await self.api.system("PATCH", self._vm_path(name, namespace), {"metadata": {"finalizers": []}})
            for dv_name, dv in list(self.objects_now(DATA_VOLUMES, namespace).items()):
                if any(ref.get("uid") == uid for ref in dv["metadata"].get("ownerReferences") or []):
                    await self.api.system(
                        "DELETE", f"/apis/cdi.kubevirt.io/v1beta1/namespaces/{namespace}/datavolumes/{dv_name}"
                    )

        self.call(finish)

    def objects_now(self, resource: kmock.resource, namespace: str) -> dict[str, dict[str, Any]]:
        """`objects` for code already running on the server's loop."""
        return {
            key[2]: obj.raw
            for key, obj in self.api.objects.items()
            if key[0] == resource and key[1] == namespace and not obj.deleted
        }


def container_status(
    *, waiting: tuple[str, str] | None = None, running: bool = False, terminated: tuple[int, str] | None = None
) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if waiting:
        state["waiting"] = {"reason": waiting[0], **({"message": waiting[1]} if waiting[1] else {})}
    if running:
        state["running"] = {"startedAt": now_text()}
    if terminated:
        state["terminated"] = {
            "exitCode": terminated[0],
            "reason": terminated[1],
            "startedAt": now_text(),
            "finishedAt": now_text(),
        }
    return {
        "name": "main",
        "state": state,
        "ready": running,
        "restartCount": 0,
        "image": "busybox",
        "imageID": "docker.io/library/busybox@sha256:0" if (running or terminated) else "",
        **({"containerID": "containerd://" + uuid.uuid4().hex} if (running or terminated) else {}),
        "started": running,
    }


def _collection_path(resource: kmock.resource, namespace: str | None) -> str:
    base = f"/api/{resource.version}" if not resource.group else f"/apis/{resource.group}/{resource.version}"
    return f"{base}/namespaces/{namespace}/{resource.plural}" if namespace else f"{base}/{resource.plural}"


def _snapshot_api_path(plural: str, name: str, namespace: str) -> str:
    return f"/apis/snapshot.kubevirt.io/v1beta1/namespaces/{namespace}/{plural}/{name}/status"
