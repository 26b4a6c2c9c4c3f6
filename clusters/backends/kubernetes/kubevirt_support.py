"""What the cluster's KubeVirt can do beyond VirtualMachines: snapshots and restores of VMs.

`snapshot.kubevirt.io/v1beta1` (VirtualMachineSnapshot, VirtualMachineRestore) first shipped in KubeVirt
1.3.0 (v1alpha1 before it). On KubeVirt 1.3 to 1.8 snapshot and restore work only when the `Snapshot`
feature gate is listed in the KubeVirt CR (spec.configuration.developerConfiguration.featureGates): without
it KubeVirt refuses them. From 1.9 the gate is on by default. Both facts are read from the KubeVirt CR the
operator keeps (status.observedKubeVirtVersion, the feature gates), so the capabilities page, check_cloud
and the snapshot/restore requests say the same words before anything is asked of the cluster.

Silence concludes nothing: a CR CloudPivot may not read (RBAC) or cannot find leaves the answer open
(`available` None); a snapshot is then asked for, and KubeVirt's own refusal is what the user reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from clusters.backends.kubernetes.client import KubeApiError, KubeClient

SNAPSHOT_API = "snapshot.kubevirt.io/v1beta1"
SNAPSHOT_API_MINIMUM = (1, 3, 0)  # the first KubeVirt release serving snapshot.kubevirt.io/v1beta1
SNAPSHOT_GATE = "Snapshot"
SNAPSHOT_GATE_DEFAULT_ON = (1, 9, 0)  # before 1.9 the gate must be listed in the KubeVirt CR
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class Support:
    """Whether VM snapshots and restores work here: True, False, or None (cannot tell), and in what words."""

    available: bool | None
    message: str
    version: str = ""


def kubevirt_cr(client: KubeClient) -> dict[str, Any] | None:
    """The cluster's KubeVirt CR (any namespace; the operator keeps one, usually kubevirt/kubevirt)."""
    found = client.call(
        "reading the KubeVirt CR (kubevirts.kubevirt.io)",
        client.custom().list_cluster_custom_object,
        "kubevirt.io",
        "v1",
        "kubevirts",
    )
    items = found.get("items") or []
    return items[0] if items else None


def version_tuple(version: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(version or "")
    return tuple(int(part) for part in match.groups()) if match else None  # type: ignore[return-value]


def snapshot_support(client: KubeClient) -> Support:
    """Whether this cluster's KubeVirt takes VirtualMachineSnapshots and VirtualMachineRestores."""
    try:
        cr = kubevirt_cr(client)
    except KubeApiError as exc:
        return Support(None, f"cannot tell whether KubeVirt VM snapshots work here: {exc.message}")
    if cr is None:
        return Support(None, "cannot tell whether KubeVirt VM snapshots work here: the cluster has no KubeVirt CR")
    status = cr.get("status") or {}
    version = status.get("observedKubeVirtVersion") or status.get("targetKubeVirtVersion") or ""
    developer = ((cr.get("spec") or {}).get("configuration") or {}).get("developerConfiguration") or {}
    gates = set(developer.get("featureGates") or [])
    disabled = set(developer.get("disabledFeatureGates") or [])
    where = f"{cr['metadata'].get('namespace', '')}/{cr['metadata'].get('name', '')}"
    parsed = version_tuple(version)
    minimum = ".".join(map(str, SNAPSHOT_API_MINIMUM))
    if parsed is not None and parsed < SNAPSHOT_API_MINIMUM:
        return Support(
            False,
            f"VM snapshots and restores need KubeVirt {minimum} or newer ({SNAPSHOT_API}); "
            f"this cluster runs KubeVirt {version}",
            version,
        )
    if SNAPSHOT_GATE in disabled:
        return Support(
            False,
            f"VM snapshots and restores are switched off on this cluster: the KubeVirt CR {where} lists the "
            f"{SNAPSHOT_GATE} feature gate under disabledFeatureGates",
            version,
        )
    if SNAPSHOT_GATE in gates or (parsed is not None and parsed >= SNAPSHOT_GATE_DEFAULT_ON):
        why = "feature gate enabled" if SNAPSHOT_GATE in gates else "on by default from KubeVirt 1.9"
        return Support(True, f"KubeVirt VM snapshots ({SNAPSHOT_API}, KubeVirt {version}: {why})", version)
    if parsed is None:
        return Support(
            None,
            f"cannot tell whether KubeVirt VM snapshots work here: KubeVirt version {version or 'not reported'} "
            f"and no {SNAPSHOT_GATE} feature gate in the KubeVirt CR {where}",
            version,
        )
    return Support(
        False,
        f"VM snapshots and restores need the {SNAPSHOT_GATE} feature gate on KubeVirt {version} (1.3 to 1.8): "
        f"an administrator adds {SNAPSHOT_GATE!r} to spec.configuration.developerConfiguration.featureGates "
        f"of the KubeVirt CR {where}",
        version,
    )
