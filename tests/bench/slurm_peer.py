"""Slurm beside CloudPivot in the same run: ../shared/slurm-peer driven from a benchmark.

The peer (Debian's Slurm 22.05 on 127.0.0.1, `epilog` profile: the tuned one to compare against) is
brought up, measured with its own bench_submit.py through slurmrestd (one sequential client, as our
REST benchmark), and stopped again. CPU is counted the same way as for CloudPivot: utime + stime of
the daemons (slurmctld, slurmd, slurmrestd, munged) and of everything they reaped, before and after.
Absent (no ../shared/slurm-peer, or `setup.sh` never run): `available()` says why and the benchmark
prints CloudPivot's figures alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests import helpers
from tests.bench.served import tree_cpu


def _peer_dir() -> Path:
    """SLURM_PEER_DIR, else ../shared/slurm-peer beside the checkout (or beside the worktrees' parent)."""
    if os.environ.get("SLURM_PEER_DIR"):
        return Path(os.environ["SLURM_PEER_DIR"])
    for base in (helpers.BASE_DIR.parent, helpers.BASE_DIR.parent.parent):
        if (base / "shared" / "slurm-peer").is_dir():
            return base / "shared" / "slurm-peer"
    return helpers.BASE_DIR.parent / "shared" / "slurm-peer"


PEER = _peer_dir()
VENV_PYTHON = Path("/opt/slurm-peer-venv/bin/python")
PID_DIR = Path("/run/slurm-peer")
DAEMONS = ("slurmctld", "slurmd", "slurmrestd")
URL = "http://127.0.0.1:6820"


def available() -> str:
    """Empty when the peer can run here; else the reason in words."""
    if not PEER.is_dir():
        return f"no Slurm peer at {PEER}"
    if not VENV_PYTHON.exists():
        return f"the Slurm peer is not set up: run `bash {PEER}/setup.sh` once (as root)"
    return ""


def cpu_seconds(pids: list[int]) -> float:
    """CPU so far of the daemons and everything under them (served.tree_cpu, as CloudPivot's is counted)."""
    return sum(tree_cpu(pids).values())


def daemon_pids() -> list[int]:
    pids = []
    for path in list(PID_DIR.glob("*.pid")) + list((PID_DIR / "munge").glob("*.pid")):
        try:
            pids.append(int(path.read_text().strip()))
        except (OSError, ValueError):
            continue
    return pids


def measure(*, n: int, serial_n: int = 10, gap: float = 1.0) -> dict[str, Any]:
    """Bring the peer up (epilog profile), run `n` jobs through slurmrestd and `serial_n` one at a time, stop it."""
    subprocess.run(["bash", str(PEER / "start.sh"), "--rest", "--clean"], check=True, capture_output=True)
    try:
        subprocess.run(["bash", str(PEER / "profile.sh"), "epilog"], check=True, capture_output=True)
        out = Path(tempfile.mkdtemp(prefix="slurm-peer-"))
        out.chmod(0o777)
        before = cpu_seconds(daemon_pids())
        burst = _bench(out / "rest.json", "--n", str(n), "--reps", "1")
        cpu = cpu_seconds(daemon_pids()) - before
        serial = _bench(out / "serial.json", "--serial", "--gap", str(gap), "--n", str(serial_n), "--reps", "1")
    finally:
        subprocess.run(["bash", str(PEER / "stop.sh")], capture_output=True)
    run, one = burst["runs"][0], serial["runs"][0]
    return {
        "submit_rate": run["submit_jobs_per_s"],
        "e2e_rate": run["e2e_jobs_per_s"],
        "submit_to_end_p50": run["lat_submit_to_end_hr_s"]["p50"],
        "submit_to_end_p95": run["lat_submit_to_end_hr_s"]["p95"],
        "idle_submit_to_end_p50": one["lat_submit_to_end_hr_s"]["p50"],
        "cpu_ms_per_job": 1000 * cpu / max(1, run["n_completed"]),
        "completed": run["n_completed"],
    }


def _bench(result: Path, *args: str) -> dict[str, Any]:
    command = [
        "runuser", "-u", "slurmbench", "--", "env", "PATH=/usr/local/bin:/usr/bin:/bin",
        str(VENV_PYTHON), str(PEER / "bench_submit.py"), "--via", "rest", "--url", URL, "--json", str(result), *args,
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=1800)
    return json.loads(result.read_text())
