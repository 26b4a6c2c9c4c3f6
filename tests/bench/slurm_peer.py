"""Slurm beside CloudPivot in the same run: ../shared/slurm-peer driven from a benchmark.

The peer (Debian's Slurm 22.05 on 127.0.0.1, `epilog` profile: the tuned one to compare against) is
brought up, measured with its own bench_submit.py through slurmrestd (one sequential client, as our
REST benchmark), and stopped again. CPU is counted the same way as for CloudPivot: utime + stime of
the daemons (slurmctld, slurmd, slurmrestd, munged) and of everything they reaped, before and after.
Absent (no ../shared/slurm-peer, or `setup.sh` never run): `available()` says why and the benchmark
prints CloudPivot's figures alone.

`measure_arrays` is the job-array side of the task sets' benchmark (bench_sets.py): `sbatch --array` as the
benchmark user, its time until sbatch returns, and an array of `true` from submit to its last element in the
job-completion log (peerlib's JobcompWatcher, the same timing source as bench_submit.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import tempfile
import time
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


# sbatch timed inside the benchmark user's own Python, so runuser's start is not in the figure.
_TIMED_SBATCH = """
import subprocess, sys, time
began = time.monotonic()
out = subprocess.run(["sbatch", "--parsable", *sys.argv[1:]], capture_output=True, text=True, check=True).stdout
print(time.monotonic() - began, out.strip().split(";")[0])
"""


def measure_arrays(*, accept_size: int, accept_reps: int, finish_size: int) -> dict[str, Any]:
    """`sbatch --array=0-<accept_size-1>` `accept_reps` times (each cancelled at once), then, on a restarted
    peer, one array of `finish_size` × `true`: submit → its last element in the job-completion log, and the
    daemons' CPU over it per element. The `epilog` profile, with MaxArraySize and MaxJobCount raised to fit.
    """
    largest = max(accept_size, finish_size)
    extra = [f"MaxArraySize={largest + 1}", f"MaxJobCount={(accept_reps + 2) * largest + 10_000}"]
    accept = []
    try:
        _start(extra)
        for rep in range(accept_reps + 1):  # the first is a warm-up
            seconds, job = _sbatch(f"--array=0-{accept_size - 1}", "-J", "setbench-accept", "-o", "/dev/null")
            subprocess.run(["scancel", job], check=True, capture_output=True)
            if rep:
                accept.append(seconds)
            time.sleep(0.5)
        subprocess.run(["bash", str(PEER / "stop.sh")], capture_output=True)
        _start(extra)  # a fresh slurmctld: the cancelled elements' records do not weigh on the array that runs
        watcher = _peerlib().JobcompWatcher(poll=0.05)
        before = cpu_seconds(daemon_pids())
        began = time.time()
        submit, _ = _sbatch(f"--array=0-{finish_size - 1}", "-J", "setbench-finish", "-o", "/dev/null")
        while len(_ended(watcher, "setbench-finish")) < finish_size and time.time() - began < 1800:
            time.sleep(0.05)
        cpu = cpu_seconds(daemon_pids()) - before
        watcher.close()
        ended = _ended(watcher, "setbench-finish")
    finally:
        subprocess.run(["bash", str(PEER / "stop.sh")], capture_output=True)
        _write_config([])
    last_seen = max(t for t, _ in ended)
    states: dict[str, int] = {}
    for _, fields in ended:
        states[fields.get("JobState", "?")] = states.get(fields.get("JobState", "?"), 0) + 1
    return {
        "accept_s": accept,
        "finish_submit_s": submit,
        "finish_s": last_seen - began,
        "finish_states": states,
        "cpu_ms_per_job": 1000 * cpu / max(1, len(ended)),
        "completed": len(ended),
    }


def _ended(watcher, name: str) -> list[tuple[float, dict[str, str]]]:
    """(seen at, fields) of the jobs named `name` in the job-completion log since the watcher began (22.05's
    filetxt log has no array ids: each element is a line of its own, with its own JobId and the array's name)."""
    with watcher._lock:
        seen = list(watcher.seen.values())
    return [(t, fields) for t, fields in seen if fields.get("Name") == name]


def _write_config(extra: list[str]) -> None:
    """/etc/slurm/slurm.conf as profile.sh writes it for `epilog`, and the `extra` lines (before start: a raised
    MaxJobCount needs a restart, and profile.sh's reconfigure would drop them)."""
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    template = (PEER / "slurm.conf.in").read_text().replace("@NODE@", node)
    profile = (PEER / "profiles" / "epilog.conf").read_text() if extra else ""
    Path("/etc/slurm/slurm.conf").write_text("\n".join([template, profile, *extra, ""]))


def _start(extra: list[str]) -> None:
    _write_config(extra)
    subprocess.run(["bash", str(PEER / "start.sh"), "--clean"], check=True, capture_output=True)


def _sbatch(*args: str) -> tuple[float, str]:
    command = [
        "runuser", "-u", "slurmbench", "--", "env", "PATH=/usr/local/bin:/usr/bin:/bin", "python3", "-c",
        _TIMED_SBATCH, "--wrap", "true", "--chdir", "/var/tmp/slurm-peer", *args,
    ]  # fmt: skip
    seconds, job = subprocess.run(command, check=True, capture_output=True, text=True, timeout=300).stdout.split()
    return float(seconds), job


def _peerlib():
    """The peer's own peerlib.py (standard library only), for its job-completion log watcher."""
    spec = importlib.util.spec_from_file_location("peerlib", PEER / "peerlib.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
