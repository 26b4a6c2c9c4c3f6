"""An OpenStack project's own limits on one server ("Will it fit?", clusters/fit.py).

The project's compute quota (instances, cores, RAM: limit and use, as Nova's limits call answers) and the
flavor against the largest hypervisor: a flavor with more RAM or root disk than any compute host has can
never be placed ("No valid host was found"). vCPUs are left out there: Nova overcommits them (the cpu
allocation ratio), RAM and disk it does not by default. Hypervisor details are admin-only by default
policy: without them the flavor is not compared, and a note says so.
"""

from __future__ import annotations

from typing import Any

from clusters.backends.base import BackendError, FitLimit
from clusters.backends.openstack.client import OpenStackClient
from clusters.backends.openstack.figures import HYPERVISOR_MICROVERSION
from clusters.backends.openstack.inventory import quota_usage

QUOTA_RESOURCES = {"instances": "instances", "vcpus": "cpu", "ram_mb": "memory_mb"}


def fit_limits(client: OpenStackClient, asked: dict[str, Any]) -> tuple[list[FitLimit], list[str]]:
    """`asked`: cpu (vCPUs), memory_mb, disk_gb and flavor (its name) of one server."""
    wanted = {"instances": 1.0} | {key: float(asked.get(key) or 0) for key in ("cpu", "memory_mb", "disk_gb")}
    limits: list[FitLimit] = []
    notes: list[str] = []
    try:
        for row in quota_usage(client):
            resource = QUOTA_RESOURCES.get(row["resource"])
            if resource and wanted.get(resource) and row["limit"] is not None:
                limit, used = float(row["limit"]), float(row["used"] or 0)
                limits.append(FitLimit(resource, wanted[resource], max(limit - used, 0.0), limit, "OpenStack quota"))
    except BackendError as exc:
        notes.append(exc.message)
    try:
        limits += _largest_host(client, wanted, asked.get("flavor") or "")
    except BackendError as exc:
        notes.append(f"the flavor was not compared with the compute hosts: {exc.message}")
    return limits, notes


def _largest_host(client: OpenStackClient, wanted: dict[str, float], flavor: str) -> list[FitLimit]:
    answer = client.compute_request(
        "reading the compute hosts", "GET", "/os-hypervisors/detail", microversion=HYPERVISOR_MICROVERSION
    )
    hosts = [hv for hv in answer.get("hypervisors") or [] if (hv.get("status") or "enabled") == "enabled"]
    if not hosts:
        return []
    source = f"flavor {flavor} vs the largest compute host" if flavor else "the largest compute host"
    limits = []
    for resource, key in (("memory_mb", "memory_mb"), ("disk_gb", "local_gb")):
        if wanted.get(resource):
            largest = max(float(hv.get(key) or 0) for hv in hosts)
            limits.append(FitLimit(resource, wanted[resource], None, largest, source))
    return limits
