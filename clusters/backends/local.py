"""The `local` backend: runs the Runner as a detached host process that starts the program.

Each attempt gets a state directory `RUNS_DIR/<external name>/`. The Runner holds an
exclusive lock on `runner.lock` for its whole life, so "is a Runner alive for this
attempt?" is answered by trying that lock, and a second Runner can never run the same
attempt. Starting is therefore idempotent: adopt when the lock is held, else (re)launch;
a relaunched Runner resumes from its state file and never starts the program twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from clusters.backends.base import AttemptRef, BackendError, ExecutionBackend, ExternalRef, Health, Observation
from clusters.models import CloudConnection

RUNNER_PROGRAM = Path(settings.BASE_DIR) / "runner_api" / "agent" / "cloudpivot_runner.py"


class LocalBackend(ExecutionBackend):
    uses_runner = True
    inventory_kinds: tuple[str, ...] = ()

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.runs_dir = Path(connection.options.get("runs_dir") or settings.RUNS_DIR)

    # ------------------------------------------------------------------ interface
    def validate(self, spec: dict[str, Any]) -> list[dict[str, str]]:
        errors = []
        if spec.get("image"):
            errors.append(
                {
                    "field": "image",
                    "message": f"the {self.connection.cloud_id} cloud runs commands on its host and cannot run images; "
                    "remove `image` or choose a kubernetes or openstack cloud",
                }
            )
        if (spec.get("resources") or {}).get("gpu"):
            errors.append({"field": "resources.gpu", "message": f"the {self.connection.cloud_id} cloud has no GPUs"})
        for field, what in (
            ("volumes", "volumes (PersistentVolumeClaims)"),
            ("node_selector", "node selectors"),
            ("tolerations", "tolerations"),
        ):
            if spec.get(field):
                errors.append(
                    {
                        "field": field,
                        "message": f"the {self.connection.cloud_id} cloud runs commands on its host and has no {what}; "
                        f"remove `{field}` or choose a kubernetes cloud",
                    }
                )
        return errors

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

    def fetch_logs(self, attempt: AttemptRef, cursor: dict[str, Any]) -> tuple[list, dict[str, Any]]:
        return [], cursor  # the Runner sends the log itself

    def health(self) -> Health:
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return Health(ok=False, message=f"cannot create {self.runs_dir}: {exc}")
        if not os.access(self.runs_dir, os.W_OK):
            return Health(ok=False, message=f"{self.runs_dir} is not writable")
        return Health(ok=True, message=f"runs tasks on this host under {self.runs_dir}")

    def inventory(self, kind: str) -> list[dict[str, Any]]:
        raise BackendError(
            f"no inventory for the local cloud {self.connection.cloud_id}: it runs tasks on the CloudPivot host itself",
            kind="not_found",
        )

    def metrics(self) -> dict[str, Any]:
        raise BackendError(
            f"no metrics for the local cloud {self.connection.cloud_id}: it runs tasks on the CloudPivot host itself",
            kind="not_found",
        )

    # ------------------------------------------------------------------ helpers
    def _state_dir(self, attempt: AttemptRef) -> Path:
        return self.runs_dir / attempt.external_name

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


def _runner_environment() -> dict[str, str]:
    """A minimal environment: the Runner (and the program) must not inherit this server's secrets."""
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": os.environ.get("LANG", "C.UTF-8")}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    return env


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _read_state(state_dir: Path) -> dict[str, Any]:
    return _read_json(state_dir / "state.json")


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
