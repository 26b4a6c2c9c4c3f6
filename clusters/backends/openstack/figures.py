"""Figures of an OpenStack cloud: hypervisor statistics, server diagnostics and the project's compute quota use.

Hypervisor CPU/memory totals left the Nova API at microversion 2.88, so they are asked for at 2.87
(Zed serves both). Hypervisor statistics and diagnostics are admin-only by default policy: a 403 is a
note (the cloud does not show them to these credentials), not an error. Every call goes through the
connection's OpenStackClient, so its timeout (`api_timeout_seconds`) and error words apply.
"""

from __future__ import annotations

from typing import Any

from clusters.backends.base import CPU_CAPACITY, CPU_USED, MEMORY_CAPACITY, MEMORY_USED, BackendError, CloudFigures
from clusters.backends.openstack.client import OpenStackClient
from clusters.backends.openstack.inventory import quota_usage
from clusters.models import CloudConnection

HYPERVISOR_MICROVERSION = "2.87"
DIAGNOSTICS_MICROVERSION = "2.48"  # the standard diagnostics format (memory_details, cpu_details)
DIAGNOSTICS_TIMEOUT_SECONDS = 5
# At most this many servers' diagnostics per pass: one GET each.
MAX_DIAGNOSTICS = 50
MIB = 1024 * 1024


def hypervisor_figures(client: OpenStackClient) -> dict[str, dict[str, float]]:
    """Hypervisor name → CPU (vCPUs allocated to servers, of all) and memory (allocated, of all) figures."""
    answer = client.compute_request(
        "reading hypervisor statistics", "GET", "/os-hypervisors/detail", microversion=HYPERVISOR_MICROVERSION
    )
    out = {}
    for hv in answer.get("hypervisors") or []:
        out[hv.get("hypervisor_hostname") or str(hv.get("id"))] = {
            CPU_CAPACITY: float(hv.get("vcpus") or 0),
            CPU_USED: float(hv.get("vcpus_used") or 0),
            MEMORY_CAPACITY: float(hv.get("memory_mb") or 0) * MIB,
            MEMORY_USED: float(hv.get("memory_mb_used") or 0) * MIB,
            "running_vms": float(hv.get("running_vms") or 0),
        }
    return out


def server_diagnostics(client: OpenStackClient, servers: list[Any], notes: list[str]) -> dict[str, dict[str, float]]:
    """Server id → memory and CPU figures from Nova's diagnostics (what the hypervisor driver reports).

    Each GET waits at most DIAGNOSTICS_TIMEOUT_SECONDS (Nova asks the compute host over RPC, which can
    hang); the first failure ends this pass's diagnostics with a note, so hypervisor and quota figures
    are never lost to a slow compute host.
    """
    out = {}
    for server in [s for s in servers if s.status == "ACTIVE"][:MAX_DIAGNOSTICS]:
        try:
            diag = client.compute_request(
                f"reading diagnostics of server {server.id}",
                "GET",
                f"/servers/{server.id}/diagnostics",
                microversion=DIAGNOSTICS_MICROVERSION,
                timeout=DIAGNOSTICS_TIMEOUT_SECONDS,
            )
        except BackendError as exc:
            notes.append(f"no server diagnostics this pass: {exc.message}")
            break
        values = {}
        memory = diag.get("memory_details") or {}
        if memory.get("maximum") is not None:
            values[MEMORY_CAPACITY] = float(memory["maximum"]) * MIB
        if memory.get("used") is not None:
            values[MEMORY_USED] = float(memory["used"]) * MIB
        cpus = diag.get("cpu_details") or []
        if cpus:
            values[CPU_CAPACITY] = float(len(cpus))
            utilisations = [c["utilisation"] for c in cpus if c.get("utilisation") is not None]
            if utilisations:  # percent of each vCPU → cores in use
                values[CPU_USED] = sum(utilisations) / 100.0
        if values:
            out[server.id] = values
    return out


def cloud_figures(connection: CloudConnection) -> CloudFigures:
    client = OpenStackClient(connection)
    figures = CloudFigures()
    for row in quota_usage(client):
        figures.connection[f"cloud_quota_used_{row['resource']}"] = float(row["used"] or 0)
        if row["limit"] is not None:
            figures.connection[f"cloud_quota_limit_{row['resource']}"] = float(row["limit"])
    try:
        figures.nodes = hypervisor_figures(client)
    except BackendError as exc:
        if exc.kind not in ("auth", "not_found"):
            raise
        figures.notes.append(f"no hypervisor statistics: {exc.message}")
    figures.instances = server_diagnostics(client, client.servers(), figures.notes)
    return figures
