"""KubeVirt (and CDI) in the loopback Kubernetes API: discovery, virt-api's subresources, the VM controller's start.

A mixin of `RealisticKubernetes` (tests/clusters/kube_fixture.py); see its docstring for what is played.
"""

from __future__ import annotations

from typing import Any

import kmock

from tests.clusters.kube_api import (
    DATA_VOLUMES,
    VIRT_API,
    VM_FINALIZER,
    VM_RESTORES,
    VM_SNAPSHOTS,
    VMIS,
    VMS,
    status_error,
)


class KubeVirtApi:
    """The KubeVirt part of the emulator; uses the emulator's storage and helpers through `self`."""

    # ------------------------------------------------------------------ KubeVirt
    def serve_kubevirt(self) -> None:
        """Install KubeVirt (and CDI): its groups appear in API discovery and their objects are stored."""
        self.kubevirt_served = True
        for resource, kind, subresources in (
            (VMS, "VirtualMachine", {"status"}),
            (VMIS, "VirtualMachineInstance", {"status"}),
            (VM_SNAPSHOTS, "VirtualMachineSnapshot", {"status"}),
            (VM_RESTORES, "VirtualMachineRestore", {"status"}),
            (DATA_VOLUMES, "DataVolume", {"status"}),
            (kmock.resource(VIRT_API, "v1", "virtualmachines"), "VirtualMachine", {"restart", "start", "stop"}),
            (kmock.resource(VIRT_API, "v1", "virtualmachineinstances"), "VirtualMachineInstance", {"pause", "unpause"}),
        ):
            self.resources[resource] = kmock.ResourceInfo(
                namespaced=True,
                kind=kind,
                verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
                subresources=subresources,
            )

    async def _virt_api(self, request: kmock.Request, system: bool) -> dict[str, Any]:
        """virt-api's subresources: its checks and refusals, and what it writes before answering."""
        plural, name, verb, namespace = request.resource.plural, request.name, request.subresource, request.namespace
        if request.method != kmock.method.PUT:
            raise status_error(405, "MethodNotAllowed", f"{request.method} is not supported on {plural}/{verb}")
        if not system and self.permissions is not None and ("update", VIRT_API, plural, verb) not in self.permissions:
            raise status_error(
                403, "Forbidden", f'{plural}.{VIRT_API} "{name}" is forbidden: cannot update resource "{plural}/{verb}"'
            )
        body = request.data if isinstance(request.data, dict) else {}
        vm = self._get(VMS, namespace, name)
        vmi = self._get(VMIS, namespace, name)
        if plural == "virtualmachines" and verb == "restart":
            if vm is None:
                raise status_error(404, "NotFound", f'virtualmachines.kubevirt.io "{name}" not found')
            if (vm.get("spec") or {}).get("runStrategy") == "Halted":
                raise status_error(409, "Conflict", "RunStrategy Halted does not support manual restart requests")
            if vmi is None or (vmi.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                raise status_error(409, "Conflict", "VM is not running")
            requests = [{"action": "Stop", "uid": vmi["metadata"]["uid"]}, {"action": "Start"}]
            await self.system(
                "PATCH",
                f"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}/status",
                {"status": {"stateChangeRequests": requests}},
            )
            if body.get("gracePeriodSeconds") == 0:  # --force --grace-period=0: the VMI is killed at once
                await self.system(
                    "DELETE", f"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}"
                )
        elif plural == "virtualmachineinstances" and verb in ("pause", "unpause"):
            if vmi is None:
                raise status_error(404, "NotFound", f'virtualmachineinstances.kubevirt.io "{name}" not found')
            paused = any(
                c.get("type") == "Paused" and c.get("status") == "True"
                for c in (vmi.get("status") or {}).get("conditions") or []
            )
            if (vmi.get("status") or {}).get("phase") != "Running":
                raise status_error(409, "Conflict", "VMI is not running")
            if verb == "pause" and paused:
                raise status_error(409, "Conflict", "VMI is already paused")
            if verb == "unpause" and not paused:
                raise status_error(409, "Conflict", "VMI is not paused")
        else:
            raise status_error(404, "NotFound", f"the server could not find the requested resource ({plural}/{verb})")
        self.virt_api_calls.append((plural, name, verb, body))
        return {}

    def _admit_restore(self, obj: dict[str, Any], namespace: str | None) -> None:
        """The VirtualMachineRestore webhook: the target must exist and be stopped."""
        target = ((obj.get("spec") or {}).get("target") or {}).get("name")
        vm = self._get(VMS, namespace, target)
        name = (obj.get("metadata") or {}).get("name")
        if vm is None or (vm.get("spec") or {}).get("runStrategy") != "Halted":
            why = "does not exist" if vm is None else "is not stopped"
            raise status_error(
                422,
                "Invalid",
                f'admission webhook "virtualmachinerestore-validator.snapshot.kubevirt.io" denied the request: '
                f'VirtualMachine "{target}" {why}',
                {"name": name, "group": "snapshot.kubevirt.io", "kind": "VirtualMachineRestore"},
            )

    async def _vm_controller_start(self, vm: dict[str, Any]) -> None:
        """The VM controller's first sync: its finalizer, and DataVolumes from dataVolumeTemplates (owned)."""
        metadata = vm["metadata"]
        namespace = metadata["namespace"]
        await self.system(
            "PATCH",
            f"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{metadata['name']}",
            {"metadata": {"finalizers": [VM_FINALIZER]}},
        )
        for template in (vm.get("spec") or {}).get("dataVolumeTemplates") or []:
            dv = {
                "apiVersion": "cdi.kubevirt.io/v1beta1",
                "kind": "DataVolume",
                "metadata": {
                    **template.get("metadata", {}),
                    "ownerReferences": [
                        {
                            "apiVersion": "kubevirt.io/v1",
                            "kind": "VirtualMachine",
                            "name": metadata["name"],
                            "uid": metadata["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": template.get("spec", {}),
            }
            await self.system("POST", f"/apis/cdi.kubevirt.io/v1beta1/namespaces/{namespace}/datavolumes", dv)

    # ------------------------------------------------------------------ controllers
