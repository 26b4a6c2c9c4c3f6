"""KubeVirt (and CDI) in the loopback Kubernetes API: discovery, virt-api's subresources, the VM controller's
start and adoption, the garbage collector's handling of a deleted VM's DataVolumes, and the KubeVirt CR.

A mixin of `RealisticKubernetes` (tests/clusters/kube_fixture.py); see its docstring for what is played.
"""

from __future__ import annotations

from typing import Any

import kmock

from tests.clusters.kube_api import (
    DATA_VOLUMES,
    KUBEVIRTS,
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
        """Install KubeVirt (and CDI): its groups appear in API discovery and their objects are stored.

        The KubeVirt CR (kubevirt/kubevirt) is the test's to write (KubeCluster.kubevirt_cr); without one,
        reading it answers an empty list, as on a cluster whose operator has not made it yet.
        """
        self.kubevirt_served = True
        for resource, kind, subresources in (
            (KUBEVIRTS, "KubeVirt", {"status"}),
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
                    "ownerReferences": [vm_owner(vm)],
                },
                "spec": template.get("spec", {}),
            }
            await self.system("POST", f"/apis/cdi.kubevirt.io/v1beta1/namespaces/{namespace}/datavolumes", dv)

    # ------------------------------------------------------------------ controllers

    async def _vm_controller_adopt(self, namespace: str | None) -> None:
        """The VM controller's adoption (its controller-ref manager): any DataVolume that a VM's template names
        and that has no controller is made the VM's again, on every sync, until the VM is being deleted."""
        for (resource, ns, _name), obj in list(self.objects.items()):
            if resource != VMS or ns != namespace or obj.deleted:
                continue
            vm = obj.raw
            if vm["metadata"].get("deletionTimestamp"):
                continue
            volumes = (((vm.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
            for volume in volumes:
                dv_name = (volume.get("dataVolume") or {}).get("name")
                dv = self._get(DATA_VOLUMES, namespace, dv_name)
                if dv is None or dv["metadata"].get("deletionTimestamp"):
                    continue
                owners = dv["metadata"].get("ownerReferences") or []
                if any(ref.get("controller") for ref in owners):
                    continue
                await self.system(
                    "PATCH",
                    f"/apis/cdi.kubevirt.io/v1beta1/namespaces/{namespace}/datavolumes/{dv_name}",
                    {"metadata": {"ownerReferences": [*owners, vm_owner(vm)]}},
                )

    async def _garbage_collector_vm_deleted(self, request: kmock.Request, vm: dict[str, Any]) -> None:
        """propagationPolicy Orphan: the garbage collector removes the VM's ownerReference from its dependents
        before the VM goes (they stay). Background (the default for custom resources) and Foreground: the
        dependents still owned go once the VM is gone (KubeCluster.vm_deletion_finished plays that part)."""
        body = request.data if isinstance(request.data, dict) else {}
        policy = request.params.get("propagationPolicy") or body.get("propagationPolicy") or "Background"
        self.vm_delete_policies.append((vm["metadata"]["name"], policy))
        if policy != "Orphan":
            return
        uid, namespace = vm["metadata"]["uid"], request.namespace
        for (resource, ns, name), obj in list(self.objects.items()):
            if resource != DATA_VOLUMES or ns != namespace or obj.deleted:
                continue
            owners = obj.raw["metadata"].get("ownerReferences") or []
            kept = [ref for ref in owners if ref.get("uid") != uid]
            if len(kept) != len(owners):
                await self.system(
                    "PATCH",
                    f"/apis/cdi.kubevirt.io/v1beta1/namespaces/{namespace}/datavolumes/{name}",
                    {"metadata": {"ownerReferences": kept or None}},
                )


def vm_owner(vm: dict[str, Any]) -> dict[str, Any]:
    """The ownerReference the VM controller puts on what it owns."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "name": vm["metadata"]["name"],
        "uid": vm["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
