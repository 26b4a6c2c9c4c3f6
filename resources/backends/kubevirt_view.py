"""Reading a KubeVirt VirtualMachine (and its VMI) as the portal's ServerView: statuses, what is in flight, faults.

Kept apart from the writes (resources/backends/kubevirt.py) so each module stays small; nothing here calls
the cluster.
"""

from __future__ import annotations

from typing import Any

from resources.backends.base import ServerView
from resources.choices import InstanceStatus

ANNOTATION_FLAVOR = "cloudpivot.io/flavor"
ANNOTATION_IMAGE = "cloudpivot.io/image"
# The runStrategy of a running CloudPivot VM: KubeVirt restarts its VMI after an infrastructure failure
# (node lost, the launcher OOM-killed) but not after the guest shut itself down (the VMI Succeeded), so a
# guest that powers off stays off until someone starts it again with a new boot id (kubevirt.io user guide,
# "Run Strategies"; `Always` would boot it again at once, behind everyone's back).
RUN_STRATEGY_RUNNING = "RerunOnFailure"
GUEST_STOPPED_NOTE = "the guest stopped itself (its VMI Succeeded; runStrategy RerunOnFailure does not restart it)"

S = InstanceStatus
# VirtualMachine status.printableStatus → portal status.
STATUS_MAP = {
    "Stopped": S.STOPPED,
    "Provisioning": S.PENDING,
    "WaitingForVolumeBinding": S.PENDING,
    "WaitingForReceiver": S.PENDING,
    "Starting": S.STARTING,
    "Running": S.RUNNING,
    "Migrating": S.RUNNING,
    "Paused": S.PAUSED,
    "Stopping": S.STOPPING,
    "Terminating": S.STOPPING,
    "ErrorUnschedulable": S.BLOCKED,  # waits for capacity or a volume: a hold, not a failure
    "ErrorPvcNotFound": S.BLOCKED,
    "ErrorDataVolumeNotFound": S.BLOCKED,
    "CrashLoopBackOff": S.FAILED,
    "ErrImagePull": S.FAILED,
    "ImagePullBackOff": S.FAILED,
    "DataVolumeError": S.FAILED,
    "Unknown": S.UNKNOWN,
}
TRANSITIONAL = {
    "Provisioning",
    "WaitingForVolumeBinding",
    "WaitingForReceiver",
    "Starting",
    "Stopping",
    "Terminating",
    "Migrating",
}


def run_strategy(vm: dict[str, Any]) -> str:
    spec = vm.get("spec") or {}
    if spec.get("runStrategy"):
        return spec["runStrategy"]
    return "Always" if spec.get("running") else "Halted"


def volume_refs(vm: dict[str, Any]) -> list[str]:
    """The VM's persistent volumes as "datavolume/<name>" or "pvc/<name>": what a delete must keep."""
    volumes = (((vm.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
    refs = []
    for volume in volumes:
        if (volume.get("dataVolume") or {}).get("name"):
            refs.append(f"datavolume/{volume['dataVolume']['name']}")
        elif (volume.get("persistentVolumeClaim") or {}).get("claimName"):
            refs.append(f"pvc/{volume['persistentVolumeClaim']['claimName']}")
    return refs


def persistent_volumes(vm: dict[str, Any]) -> list[str]:
    """The names of the VM's DataVolume (or PVC) volumes: what a snapshot captures and a delete keeps."""
    return [ref.split("/", 1)[1] for ref in volume_refs(vm)]


def vm_view(vm: dict[str, Any], restored_from: str = "", vmi: dict[str, Any] | None = None) -> ServerView:
    """One observation of a VM; `vmi` (its VirtualMachineInstance, if any) tells a guest that shut itself
    down (VMI Succeeded, left alone by RerunOnFailure) from a start the controller has not acted on yet."""
    metadata, status = vm["metadata"], vm.get("status") or {}
    raw = status.get("printableStatus") or ""
    strategy = run_strategy(vm)
    vmi_phase = ((vmi or {}).get("status") or {}).get("phase") or ""
    guest_stopped = strategy in (RUN_STRATEGY_RUNNING, "Manual") and raw == "Stopped" and vmi_phase == "Succeeded"
    in_flight = []
    if not raw:
        in_flight.append("no status from the VM controller yet")
    elif raw in TRANSITIONAL:
        in_flight.append(raw.lower())
    if status.get("stateChangeRequests"):
        actions = ", ".join(r.get("action", "?") for r in status["stateChangeRequests"])
        in_flight.append(f"state change requests pending: {actions}")
    if status.get("snapshotInProgress"):
        in_flight.append(f"snapshot {status['snapshotInProgress']} in progress")
    if status.get("restoreInProgress"):
        in_flight.append(f"restore {status['restoreInProgress']} in progress")
    if metadata.get("deletionTimestamp"):
        in_flight.append("being deleted")
    if strategy in ("Always", RUN_STRATEGY_RUNNING) and raw == "Stopped" and not guest_stopped:
        in_flight.append(f"runStrategy {strategy}: the controller has not started it yet")
    if strategy == "Halted" and raw in ("Running", "Paused"):
        in_flight.append("runStrategy Halted: the controller has not stopped it yet")
    annotations = metadata.get("annotations") or {}
    fault = ""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Failure" and str(condition.get("status")) == "True":
            fault = condition.get("message") or condition.get("reason") or ""
        elif not fault and STATUS_MAP.get(raw) in (S.FAILED, S.BLOCKED) and str(condition.get("status")) == "False":
            fault = condition.get("message") or ""
    return ServerView(
        id=metadata["name"],
        status=STATUS_MAP.get(raw, S.PENDING if not raw else S.UNKNOWN),
        settled=not in_flight,
        raw_status=raw or "none",
        task_state="; ".join(in_flight),
        image_id=restored_from or annotations.get(ANNOTATION_IMAGE, ""),
        flavor=annotations.get(ANNOTATION_FLAVOR, ""),
        fault=fault,
        source="KubeVirt",
        address=vmi_address(vmi),
        evidence={
            "printable_status": raw or None,
            "run_strategy": strategy,
            "ready": status.get("ready"),
            "in_flight": in_flight or None,
            "vmi_phase": vmi_phase or None,
            **_guest_agent(vmi),
            **({"note": GUEST_STOPPED_NOTE} if guest_stopped else {}),
            # who stopped it, for a refresh that finds it stopped unasked: the guest, or a runStrategy Halted
            # written outside CloudPivot (virtctl stop); CloudPivot's own stops are known by their Operation
            **({"stopped_by": "guest" if guest_stopped else "outside"} if raw == "Stopped" else {}),
            **({"restored_from": restored_from} if restored_from else {}),
        },
    )


def _guest_agent(vmi: dict[str, Any] | None) -> dict[str, Any]:
    """The VMI's uid (a new one each boot) and whether virt-handler reports the guest agent connected (the
    VMI condition AgentConnected, kept True while qemu-guest-agent answers inside the guest)."""
    if not vmi:
        return {}
    connected = any(
        c.get("type") == "AgentConnected" and str(c.get("status")) == "True"
        for c in (vmi.get("status") or {}).get("conditions") or []
    )
    return {"vmi_uid": (vmi.get("metadata") or {}).get("uid") or None, "agent_connected": connected}


def vmi_address(vmi: dict[str, Any] | None) -> str:
    """The first address KubeVirt reports on the VMI's interfaces (the guest agent's or the pod network's)."""
    for interface in ((vmi or {}).get("status") or {}).get("interfaces") or []:
        for address in [interface.get("ipAddress"), *(interface.get("ipAddresses") or [])]:
            if address:
                return str(address).split("/", 1)[0]
    return ""
