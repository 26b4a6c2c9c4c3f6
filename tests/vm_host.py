"""A test backend whose every attempt runs as a task VM runs it: its own host program (the zipapp the OpenStack
user data carries, clusters/backends/agent_bundle.py) with the attempt's `cpr_` credential, over protocol v2, in
a state directory of its own standing in for the VM. Its fault tests run here with real processes and a real
Daphne, without a VM; tests/plugins/openstack.py plays the VM's boot from the user data itself.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from clusters.backends.agent_bundle import agent_zipapp
from clusters.backends.base import AttemptRef, BackendError, ExternalRef, Observation
from clusters.backends.local import LocalBackend, _read_json, _runner_environment, _write_private


def host_program(runs_dir: Path) -> Path:
    """The zipapp, written once per runs directory, as cloud-init writes it into a VM."""
    path = runs_dir / "cloudpivot-agent.pyz"
    if not path.exists():
        runs_dir.mkdir(parents=True, exist_ok=True)
        path.write_bytes(agent_zipapp())
    return path


class VmHostBackend(LocalBackend):
    """One host program per attempt under RUNS_DIR/<external name>/ (its runs directory, the VM's). Like a VM
    it is given the one-time bootstrap secret, not the credential, and exchanges it at its first start."""

    needs_bootstrap_secret = True
    hands_out = False  # started by the reconcile pass, as in a cloud

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        state_dir = self._state_dir(attempt)
        if agent_alive(state_dir):
            return ExternalRef(ref=str(state_dir), adopted=True)
        try:
            state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            credential_file, bootstrap_file = state_dir / "credential", state_dir / "bootstrap"
            if not credential_file.exists():
                _write_private(bootstrap_file, attempt.bootstrap_secret)
            log = open(state_dir / "agent.log", "ab")  # noqa: SIM115 - handed to the child
            try:
                process = subprocess.Popen(
                    [
                        sys.executable,
                        str(host_program(self.runs_dir)),
                        "--server-url",
                        settings.RUNNER_SERVER_URL,
                        "--credential-file",
                        str(credential_file),
                        "--bootstrap-file",
                        str(bootstrap_file),
                        "--state-dir",
                        str(state_dir),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=_runner_environment(),
                    start_new_session=True,
                    close_fds=True,
                    cwd=state_dir,
                )
            finally:
                log.close()
        except OSError as exc:
            raise BackendError(f"could not start the host program on this host: {exc}") from exc
        (state_dir / "runner.pid").write_text(str(process.pid))
        return ExternalRef(ref=str(state_dir), adopted=False)

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        return [self._observe_one(attempt) for attempt in attempts]

    def stop(self, attempt: AttemptRef) -> None:
        """Kill the program's process group and the host program: the last resort when it did not stop it."""
        state_dir = self._state_dir(attempt)
        program = _read_json(state_dir / attempt.external_name / "program.json").get("pid")
        for pid in (program, _read_int(state_dir / "runner.pid")):
            if pid:
                try:
                    os.killpg(int(pid), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def cleanup(self, attempt: AttemptRef) -> bool:
        state_dir = self._state_dir(attempt)
        if agent_alive(state_dir):
            return False
        shutil.rmtree(state_dir, ignore_errors=True)
        return not state_dir.exists()

    def _observe_one(self, attempt: AttemptRef) -> Observation:
        state_dir = self._state_dir(attempt)
        if not state_dir.exists():
            return Observation(attempt.external_name, exists=False, phase="gone", reason="no state directory")
        alive = agent_alive(state_dir)
        exit_info = _read_json(state_dir / attempt.external_name / "exit.json")
        evidence = {"runner_alive": alive, "state_dir": str(state_dir)}
        if alive:
            return Observation(attempt.external_name, exists=True, phase="running", evidence=evidence)
        if exit_info:
            code = exit_info.get("exit_code")
            return Observation(
                attempt.external_name,
                exists=True,
                phase="succeeded" if code == 0 else "failed",
                exit_code=code,
                evidence=evidence | {"exit": exit_info},
            )
        return Observation(
            attempt.external_name, exists=True, phase="gone", reason="the Runner is not running", evidence=evidence
        )


def agent_alive(state_dir: Path) -> bool:
    """A live host program holds agent.lock; if we can take it, nobody runs this attempt."""
    lock_path = state_dir / "agent.lock"
    if not lock_path.exists():
        return False
    with open(lock_path, "a+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def program_pid(state_dir: Path, external_name: str) -> int | None:
    return _read_json(state_dir / external_name / "program.json").get("pid")


def parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
