"""A test backend that runs the v1 Runner as one host process per attempt, as the `local` backend did
before the host agent. The VM Runner (runner_api/agent/cloudpivot_runner.py) is what OpenStack VMs
run; this lets its fault tests run on this host with real processes and a real Daphne, without a VM.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from clusters.backends.base import AttemptRef, BackendError, ExternalRef, Observation
from clusters.backends.local import LocalBackend, _read_json, _runner_environment, _write_private

RUNNER_PROGRAM = Path(settings.BASE_DIR) / "runner_api" / "agent" / "cloudpivot_runner.py"


class RunnerHostBackend(LocalBackend):
    """One Runner process per attempt under RUNS_DIR/<external name>/ (the protocol v1 path)."""

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        state_dir = self._state_dir(attempt)
        if self._runner_alive(state_dir):
            return ExternalRef(ref=str(state_dir), adopted=True)
        try:
            state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            credential_file = state_dir / "credential"
            _write_private(credential_file, attempt.runner_credential)
            log = open(state_dir / "runner.log", "ab")  # noqa: SIM115 - handed to the child
            try:
                process = subprocess.Popen(
                    [
                        sys.executable,
                        str(RUNNER_PROGRAM),
                        "--server-url",
                        settings.RUNNER_SERVER_URL,
                        "--credential-file",
                        str(credential_file),
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
            raise BackendError(f"could not start the Runner on this host: {exc}") from exc
        (state_dir / "runner.pid").write_text(str(process.pid))
        return ExternalRef(ref=str(state_dir), adopted=False)

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        return [self._observe_one(attempt) for attempt in attempts]

    def stop(self, attempt: AttemptRef) -> None:
        """Kill the program's process group and the Runner: the last resort when the Runner did not stop it."""
        state_dir = self._state_dir(attempt)
        for pid in (_read_state(state_dir).get("shim_pid"), _read_int(state_dir / "runner.pid")):
            if pid:
                try:
                    os.killpg(int(pid), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def cleanup(self, attempt: AttemptRef) -> bool:
        state_dir = self._state_dir(attempt)
        if self._runner_alive(state_dir):
            return False
        shutil.rmtree(state_dir, ignore_errors=True)
        return not state_dir.exists()

    # ------------------------------------------------------------------ helpers
    def _runner_alive(self, state_dir: Path) -> bool:
        """A live Runner holds runner.lock; if we can take it, nobody runs this attempt."""
        lock_path = state_dir / "runner.lock"
        if not lock_path.exists():
            return False
        with open(lock_path, "a+b") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False

    def _observe_one(self, attempt: AttemptRef) -> Observation:
        state_dir = self._state_dir(attempt)
        if not state_dir.exists():
            return Observation(attempt.external_name, exists=False, phase="gone", reason="no state directory")
        alive = self._runner_alive(state_dir)
        exit_info = _read_json(state_dir / "exit.json")
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


def _read_state(state_dir: Path) -> dict[str, Any]:
    return _read_json(state_dir / "state.json")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
