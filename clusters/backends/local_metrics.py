"""Figures of the `local` cloud: this host's load and memory (os.getloadavg, /proc/meminfo)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from clusters.backends.base import CPU_CAPACITY, MEMORY_CAPACITY, MEMORY_USED, CloudFigures
from clusters.models import CloudConnection

MEMINFO = Path("/proc/meminfo")


def meminfo_bytes(text: str) -> dict[str, int]:
    """`MemTotal:  16318412 kB` lines → {"MemTotal": 16710053888, …}."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    return out


def cloud_figures(connection: CloudConnection) -> CloudFigures:
    figures = CloudFigures()
    values: dict[str, float] = {CPU_CAPACITY: float(os.cpu_count() or 1)}
    # The 1-minute load average stands in for cores in use: runnable processes, a fair host-level sign.
    values["load_1m"] = os.getloadavg()[0]
    try:
        memory = meminfo_bytes(MEMINFO.read_text())
    except OSError:
        figures.notes.append("/proc/meminfo is not readable on this host: no memory figures")
    else:
        if "MemTotal" in memory and "MemAvailable" in memory:
            values[MEMORY_CAPACITY] = float(memory["MemTotal"])
            values[MEMORY_USED] = float(memory["MemTotal"] - memory["MemAvailable"])
    figures.nodes[socket.gethostname()] = values
    return figures
