"""The `local` backend: one host agent per runs directory runs every attempt of the connection.

The agent (runner_api/agent/cloudpivot_agent.py, docs/runner.md "The host agent") holds an exclusive
lock on `RUNS_DIR/agent.lock` for its life, so "is the agent alive?" is answered by trying that lock,
and a second agent exits at once. It takes its attempts from POST /runner/v2/sync and keeps each in
`RUNS_DIR/<external name>/`. Its sync admits the connection's PENDING tasks and hands them out
(tasks/services/runner_sync.py), and it removes a closed attempt's directory itself and says so; so
the server's part is: make sure the agent runs (the reconcile pass launches one when work waits),
wake it when something changes (`local_agent_wake`), and clean up after an agent that never
confirmed. A relaunched agent re-attaches to running programs and never starts one twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from cloudpivot.credentials import agent_credential
from clusters.backends.base import AttemptRef, BackendError, ExecutionBackend, ExternalRef, Health, Observation
from clusters.data_refs import DIR, data_roots, dir_ref_problem
from clusters.models import CloudConnection
from runner_api.agent.cloudpivot_supervisor import CRASH_ENV, RUN_AS_ENV, lock_held

AGENT_PROGRAM = Path(settings.BASE_DIR) / "runner_api" / "agent" / "cloudpivot_agent.py"
# The backend kind whose attempts a host agent admits and takes itself (POST /runner/v2/sync).
LOCAL = "local"


def connection_run_as(connection: CloudConnection) -> str:
    """The account programs run as (docs/security.md): the connection's `run_as`, else CLOUDPIVOT_RUN_AS;
    "" runs them as the agent's own user. The agent's supervisor drops to it before exec."""
    return str(connection.options.get("run_as") or os.environ.get(RUN_AS_ENV, "")).strip()


def connection_runs_dir(connection: CloudConnection) -> Path:
    return Path(os.path.abspath(connection.options.get("runs_dir") or settings.RUNS_DIR))


def agent_name(runs_dir: Path) -> str:
    """The agent's name (and so its credential) follows its runs directory: one agent per directory."""
    return "local-" + hashlib.sha256(os.path.abspath(runs_dir).encode()).hexdigest()[:16]


def agent_server_url() -> str:
    """Where this host's agents report: their own web process under `manage.py serve`, else the Runners' URL."""
    return settings.AGENT_SERVER_URL or settings.RUNNER_SERVER_URL


def running_agent_server_url(runs_dir: Path) -> str | None:
    """The --server-url the live agent of `runs_dir` was started with (from /proc), or None."""
    pid = agent_pid(runs_dir)
    if not pid or pid < 0:
        return None
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for flag, value in zip(words, words[1:], strict=False):
        if flag == b"--server-url":
            return value.decode(errors="replace")
    return None


def agent_pid(runs_dir: Path) -> int | None:
    """The live agent's pid (-1 if it has not written it yet), or None if nobody holds agent.lock."""
    path = runs_dir / "agent.lock"
    if not lock_held(str(path)):
        return None
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else -1


def local_agent_wake(*, connection_id: int | None = None) -> bool:
    """Something changed for an agent (work to admit, a stop): ring the doorbell its long-poll listens to
    (any web process, with Redis). If no long-poll heard it (the in-process layer of another process),
    poke this host's agent (SIGUSR1) so it syncs at once. Never raises: a missed wake-up costs the
    long-poll's next database look. True if an agent heard it (or, with a shared layer, may have)."""
    from cloudpivot import realtime

    if realtime.ring_agents():
        return True
    connections = CloudConnection.objects.filter(backend=LOCAL)
    if connection_id is not None:
        connections = connections.filter(pk=connection_id)
    poked = False
    for runs_dir in {connection_runs_dir(connection) for connection in connections}:
        pid = agent_pid(runs_dir)
        if pid and pid > 0:
            try:
                os.kill(pid, signal.SIGUSR1)
                poked = True
            except (ProcessLookupError, PermissionError):
                pass
    return poked


def local_agent_ensure(connection: CloudConnection) -> bool:
    """Launch the connection's agent if none runs (it admits and takes its work itself); True if it launched one."""
    backend = LocalBackend(connection)
    if agent_pid(backend.runs_dir) is not None:
        return False
    backend.ensure_agent()
    return True


def agent_credential_file_write(runs_dir: Path) -> Path:
    """The agent's credential in RUNS_DIR/agent.credential (mode 600), the directory created 700 if need be."""

    runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = runs_dir / "agent.credential"
    _write_private(path, agent_credential(name=agent_name(runs_dir)))
    return path


def agent_stop(runs_dir: Path) -> bool:
    """SIGTERM the agent: it exits, its programs run on (a new agent re-attaches to them)."""
    pid = agent_pid(runs_dir)
    if pid and pid > 0:
        try:
            os.kill(pid, signal.SIGTERM)
            return True
        except ProcessLookupError:
            pass
    return False


class LocalBackend(ExecutionBackend):
    uses_runner = True
    hands_out = True  # the host agent takes its attempts in a sync; ensure_started only notes the hand-out
    # `network: none` only: the host program runs it in a network namespace of its own (it needs root); a list of
    # destinations would need a firewall per program, which `local` does not have (docs/security.md#egress).
    egress_closes = frozenset({"none"})
    inventory_kinds: tuple[str, ...] = ()
    # Host directories under the connection's `data_roots` (docs/data.md), named to the program, not mounted.
    data_kinds = frozenset({DIR})

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.runs_dir = connection_runs_dir(connection)

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
        return errors + self._data_errors(spec)

    def _data_errors(self, spec: dict[str, Any]) -> list[dict[str, str]]:
        """Each `dir` reference must be an existing directory inside an allowed root once its symlinks are resolved
        (data_resolved stores it so); the program sees it at its host path, so `path` is refused."""
        errors, roots, cloud = [], data_roots(self.connection.options), self.connection.cloud_id
        for index, ref in enumerate(spec.get("data") or []):
            if ref["kind"] != DIR:
                continue
            if ref.get("path"):
                message = (
                    f"the {cloud} cloud mounts nothing: the program finds the directory at its host path, in "
                    f"CLOUDPIVOT_DATA_{index}; remove `path` (give `name` for CLOUDPIVOT_DATA_<NAME>)"
                )
                errors.append({"field": f"data.{index}.path", "message": message})
            _real, problem = dir_ref_problem(ref["ref"], roots, cloud=cloud)
            if problem:
                errors.append({"field": f"data.{index}.ref", "message": problem})
        return errors

    def data_resolved(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Each `dir` reference at its resolved path (symlinks followed), so the program gets the checked directory."""
        roots, cloud = data_roots(self.connection.options), self.connection.cloud_id
        resolved = []
        for ref in spec.get("data") or []:
            real = dir_ref_problem(ref["ref"], roots, cloud=cloud)[0] if ref["kind"] == DIR else ""
            resolved.append({**ref, "ref": real} if real else dict(ref))
        return resolved

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        """The agent takes the attempt itself (v2 sync); here we only make sure it runs and ask it to look now."""
        self.ensure_agent()
        state_dir = self._state_dir(attempt)
        return ExternalRef(ref=str(state_dir), adopted=state_dir.exists())

    def ensure_agent(self) -> int | None:
        """Poke the live agent, or launch one (detached, its own session, a minimal environment)."""
        pid = agent_pid(self.runs_dir)
        if pid:
            try:
                os.kill(pid, signal.SIGUSR1)
            except (ProcessLookupError, PermissionError):
                pass
            return pid
        try:
            credential_file = agent_credential_file_write(self.runs_dir)
            name = agent_name(self.runs_dir)
            with open(self.runs_dir / "agent.log", "ab") as log:
                launcher = subprocess.Popen(
                    [
                        sys.executable,
                        str(AGENT_PROGRAM),
                        "--detach",
                        "--server-url",
                        agent_server_url(),
                        "--credential-file",
                        str(credential_file),
                        "--state-dir",
                        str(self.runs_dir),
                        "--name",
                        name,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=_runner_environment(run_as=connection_run_as(self.connection)),
                    start_new_session=True,
                    close_fds=True,
                    cwd=self.runs_dir,
                )
            launcher.wait(timeout=30)  # --detach: it forks the agent and returns once the agent holds its lock
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendError(f"could not start the host agent on this host: {exc}") from exc
        return agent_pid(self.runs_dir)

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        """Liveness only: the agent's reports are the truth; a dead agent is relaunched by the reconciler."""
        alive = agent_pid(self.runs_dir) is not None
        evidence = {"agent_alive": alive, "runs_dir": str(self.runs_dir)}
        if alive:
            return [Observation(a.external_name, exists=True, phase="running", evidence=evidence) for a in attempts]
        observations = []
        for a in attempts:
            # The attempt's directory holds its program (under its supervisor) or its exit status and output:
            # the next agent reports them, so the agent is started again rather than the attempt ended.
            on_host = self._state_dir(a).exists()
            observations.append(
                Observation(
                    a.external_name,
                    exists=on_host,
                    phase="gone",
                    reason="the host agent is not running",
                    evidence={**evidence, "state_on_host": on_host},
                )
            )
        return observations

    def stop(self, attempt: AttemptRef) -> None:
        """The last resort when the agent did not stop the program: kill its process group (the supervisor
        then records the exit, so the agent still reports it)."""
        program = _read_json(self._state_dir(attempt) / "program.json")
        pid = program.get("pid")
        if pid and _start_time(int(pid)) == program.get("start_time"):
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def cleanup(self, attempt: AttemptRef) -> bool:
        """Remove the attempt directory of a closed attempt once its program (and supervisor) is gone."""
        state_dir = self._state_dir(attempt)
        if lock_held(str(state_dir / "supervisor.lock")):
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
        run_as = connection_run_as(self.connection)
        if run_as:
            try:
                pwd.getpwnam(run_as)
            except KeyError:
                return Health(ok=False, message=f"run_as names {run_as}, and there is no such user on this host")
        who = run_as or pwd.getpwuid(os.geteuid()).pw_name
        return Health(ok=True, message=f"runs tasks on this host as {who} under {self.runs_dir}")

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


def _runner_environment(*, run_as: str = "") -> dict[str, str]:
    """A minimal environment: the Runner (and the program) must not inherit this server's secrets."""
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": os.environ.get("LANG", "C.UTF-8")}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    if run_as:
        env[RUN_AS_ENV] = run_as
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):  # which CAs the agent trusts: a self-signed proxy's, say
        if os.environ.get(name):
            env[name] = os.environ[name]
    if os.environ.get(CRASH_ENV):  # the test-only crash switch (docs/crash-points.md) reaches the agents it launches
        env[CRASH_ENV] = os.environ[CRASH_ENV]
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


def _start_time(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2 :].split()[19])
