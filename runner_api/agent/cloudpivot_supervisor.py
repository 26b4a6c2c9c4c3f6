"""The host agent's supervisor: a forked copy of the agent that starts one program and outlives the agent.

Also the small file helpers the agent and the supervisor share. Standard library only, Python 3.8+.

Run as: where the agent runs as root, `CLOUDPIVOT_RUN_AS` in its environment (the `local` connection's
`run_as`, docs/security.md) names the unprivileged account programs run as. The program's side of the fork
drops to it just before exec; what the program must write stays writable: its output files were opened
before (inherited descriptors), its default working directory is handed to the account, and its result file
is created for the account and passed as an inherited descriptor (`CLOUDPIVOT_RESULT_FILE=/dev/fd/N`), since
the account cannot walk into the agent's private directories. Everything else of the agent's stays 0600/0700.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import pwd
import signal
import socket
import struct
import sys
import time

RUN_AS_ENV = "CLOUDPIVOT_RUN_AS"
CRASH_ENV = "CLOUDPIVOT_CRASH_AT"
# The file system is full (or the user's quota is): a passing state, waited out (issue 16, item 2).
NO_ROOM = (errno.ENOSPC, errno.EDQUOT)
NO_ROOM_RETRY_SECONDS = 1.0
RESULT = "result.json"
CLONE_NEWNET = 0x40000000  # <linux/sched.h>
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1  # <linux/sockios.h>, <net/if.h>

try:  # run as a script or from the zipapp (its sibling modules beside it), or imported as a package module
    import cloudpivot_common as common
    from cloudpivot_outputs import OUTPUTS_FILE, collect_outputs
    from cloudpivot_stage import StageError, stage_in
except ImportError:  # pragma: no cover - imported as a package module
    from runner_api.agent import cloudpivot_common as common
    from runner_api.agent.cloudpivot_outputs import OUTPUTS_FILE, collect_outputs
    from runner_api.agent.cloudpivot_stage import StageError, stage_in


def write_json(path: str, value) -> None:
    """Atomic (tmp + rename), not fsynced: it must survive this process dying, not the machine.
    A write that fails (a full disk) leaves no partial temporary file behind to hold space."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    try:
        with open(tmp, "w") as handle:
            handle.write(json.dumps(value))
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json_if_room(path: str, value) -> bool:
    """write_json; False when the file system is full (nothing written), any other error raised."""
    try:
        write_json(path, value)
    except OSError as exc:
        if exc.errno not in NO_ROOM:
            raise
        return False
    return True


def write_json_when_room(path: str, value) -> None:
    """write_json, waiting while the file system is full: what it writes is the only record (exit.json)."""
    while not write_json_if_room(path, value):
        time.sleep(NO_ROOM_RETRY_SECONDS)


def read_json(path: str):
    try:
        return common.read_json(path)
    except ValueError:
        return None


_crash_hits = {}


def crash_point(name: str) -> None:
    """The agent's side of the test-only crash switch (cloudpivot/crash_points.py, docs/crash-points.md):
    SIGKILL this process the N-th time it reaches `name` when CLOUDPIVOT_CRASH_AT=name[:N]. A copy, not an
    import: the agent is standard library only and runs where the server's code is not installed."""
    wanted, _, count = os.environ.get(CRASH_ENV, "").strip().partition(":")
    if wanted != name:
        return
    _crash_hits[name] = _crash_hits.get(name, 0) + 1
    if _crash_hits[name] == (int(count) if count.isdigit() else 1):
        sys.stderr.write(
            "cloudpivot: crash point %s reached (%d): SIGKILL pid %d\n" % (name, _crash_hits[name], os.getpid())
        )
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def lock_held(path: str) -> bool:
    """Whether some process holds an exclusive flock on `path` (the supervisor's and the agent's liveness)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def status_of(wait_status: int) -> dict:
    if os.WIFSIGNALED(wait_status):
        return {"exit_code": None, "signal": os.WTERMSIG(wait_status)}
    return {"exit_code": os.WEXITSTATUS(wait_status), "signal": None}


# --------------------------------------------------------------------------- the supervisor (a forked copy)


def supervise(directory: str, spec: dict, keep: tuple) -> None:
    """Runs in the forked child and never returns: start the program, wait for it, write exit.json.

    Its own session, so Ctrl-C to the agent's group or the agent's death leaves it alone; only
    os.* calls, then os._exit.
    """
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
            signal.signal(number, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for name in os.listdir("/proc/self/fd"):  # nothing of the agent's (lock, sockets, pipes) stays open
            if int(name) > 2 and int(name) not in keep:
                try:
                    os.close(int(name))
                except OSError:
                    pass
        ready = keep[1]
        error_r, error_w = os.pipe()  # close-on-exec: EOF means the exec succeeded
        pid = os.fork()
        if pid == 0:
            os.close(error_r)
            exec_program(directory, spec, error_w)
        try:
            os.setpgid(pid, pid)  # as the child does: no window where killpg misses it
        except OSError:
            pass
        os.close(error_w)
        failure = b""
        while True:
            piece = os.read(error_r, 4096)
            if not piece:
                break
            failure += piece
        os.close(error_r)
        boot_id = common.read_boot_id()
        info = {"pid": pid, "start_time": common.proc_start_time(pid), "boot_id": boot_id}
        write_json(os.path.join(directory, "program.json"), info)
        os.write(ready, b"ok")
        os.close(ready)
        while True:
            try:
                _, wait_status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        status = status_of(wait_status)
        if failure:
            status["error"] = failure.decode("utf-8", "replace")
            with open(os.path.join(directory, "stderr"), "ab") as err:
                err.write(("cloudpivot-agent: %s\n" % status["error"]).encode("utf-8", "replace"))
        status["finished"] = common.utc_stamp()
        if os.environ.get(RUN_AS_ENV):
            drop_empty_result(os.path.join(directory, RESULT))
        # Held (and supervisor.lock with it, so the agent waits) until the disk has room for it.
        write_json_when_room(os.path.join(directory, "exit.json"), status)
        if spec.get("outputs"):  # after exit.json (the exit code comes first), before supervisor.lock is let go
            keep_outputs(directory, spec)
        code = 0
    finally:
        os._exit(code)


def keep_outputs(directory: str, spec: dict) -> None:
    """Collect the declared outputs into the store target (docs/data.md); the manifest goes to outputs.json,
    which the agent reports as the `outputs` event before the exit. Files the program's account could not
    write itself are never picked up on its behalf (a root supervisor copying for a `run_as` account)."""
    try:
        account = run_as_account(os.environ.get(RUN_AS_ENV, ""))
    except RunAsError:
        account = None
    try:
        manifest = collect_outputs(spec["workdir"], spec["outputs"], account.pw_uid if account else None)
    except Exception as exc:  # noqa: BLE001 - whatever happens here, the exit status is already kept
        manifest = {"files": [], "missing": [], "complete": False, "reason": "the outputs were not collected: %s" % exc}
    write_json_when_room(os.path.join(directory, OUTPUTS_FILE), manifest)


def exec_program(directory: str, spec: dict, error_w: int) -> None:
    """The program's side of the fork: its own process group, files for output, then exec."""
    code, message = 126, "cannot start the program"
    argv = spec.get("argv") or []
    try:
        os.setpgid(0, 0)
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            os.dup2(os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), fd)
        if not argv or not all(isinstance(arg, str) for arg in argv):
            code, message = 127, "the assignment has no valid command (argv must be a non-empty list of strings)"
        elif spec.get("secret_error"):
            code, message = 127, spec["secret_error"]
        else:
            account = run_as_account(os.environ.get(RUN_AS_ENV, ""))
            if account is not None:
                hand_over(directory, spec, account)
            try:
                os.chdir(spec["workdir"])  # before dropping privileges: the account cannot walk into var/
            except OSError:
                message = "working directory not found: %s" % spec["workdir"]
            else:
                staged = stage_in(spec.get("stage_in"))  # before the network closes (`network: none`)
                if staged:
                    raise StageError(staged)
                if spec.get("network") == "none":  # before the drop: only root may make a network namespace
                    close_network()
                if account is not None:
                    become(account)
                problem = common.write_secret_files(spec.get("secret_files"))  # as the program's own user
                if problem:
                    code, message = 126, problem
                else:
                    os.execvpe(argv[0], argv, spec["env"])
    except (RunAsError, NetworkError, StageError) as exc:
        code, message = 126, str(exc)
    except FileNotFoundError:
        code, message = 127, "command not found: %s" % argv[0]
    except PermissionError:
        code, message = 126, "permission denied: %s" % argv[0]
    except OSError as exc:
        message = "cannot start %s: %s" % (argv[0] if argv else "?", exc.strerror or exc)
    finally:
        try:
            os.write(error_w, message.encode("utf-8", "replace"))
        finally:
            os._exit(code)


# --------------------------------------------------------------------------- no network (`network: none`)


class NetworkError(Exception):
    """The program was to run without network and its network could not be closed: it is not run at all."""


def close_network() -> None:
    """Move this process into a network namespace of its own (docs/security.md#egress): no interface but its own
    loopback, so nothing it opens reaches the host's network or the host's own 127.0.0.1. Raises NetworkError
    when the kernel refuses (the agent is not root), so the program never runs with the network it was denied."""
    try:
        unshare = ctypes.CDLL(None, use_errno=True).unshare
    except (OSError, AttributeError) as exc:
        raise NetworkError("cannot run the program without network (network: none): no unshare(): %s" % exc) from None
    if unshare(CLONE_NEWNET) != 0:
        number = ctypes.get_errno()
        hint = " (the host agent must run as root to close a task's network)" if number == errno.EPERM else ""
        raise NetworkError(
            "cannot run the program without network (network: none): unshare(CLONE_NEWNET) failed: %s%s"
            % (os.strerror(number), hint)
        )
    loopback_up()


def loopback_up() -> None:
    """The new namespace's loopback is down; bring it up so the program can talk to itself. Best effort."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16sH14s", b"lo", 0, b"")
            flags = struct.unpack("16sH", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request)[:18])[1]
            fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))
    except OSError:
        pass


# --------------------------------------------------------------------------- run as another account


class RunAsError(Exception):
    """The program cannot be run as the configured account (no such account; this process may not switch)."""


def run_as_account(name: str):
    """The account programs run as (a pwd entry), or None: no `run_as`, or it is this process's own user."""
    if not name:
        return None
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        raise RunAsError("cannot run the program as %s: there is no such user on this host" % name) from None
    if account.pw_uid == os.getuid():
        return None
    if os.geteuid() != 0:
        raise RunAsError("cannot run the program as %s: the host agent does not run as root" % name)
    return account


def hand_over(directory: str, spec: dict, account) -> None:
    """Before the drop: give the account its working directory (the default one), its result file and home."""
    uid, gid = account.pw_uid, account.pw_gid
    default_work = os.path.join(directory, "work")
    if os.path.realpath(spec["workdir"]) == os.path.realpath(default_work):
        os.chown(default_work, uid, gid)
    result = os.open(os.path.join(directory, RESULT), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchown(result, uid, gid)
    os.set_inheritable(result, True)
    env = spec["env"]
    env["CLOUDPIVOT_RESULT_FILE"] = "/dev/fd/%d" % result
    env["HOME"] = spec["workdir"]
    env["USER"] = env["LOGNAME"] = account.pw_name


def become(account) -> None:
    """Drop to the account for good: its groups, then its group, then its user (root cannot come back)."""
    try:
        os.initgroups(account.pw_name, account.pw_gid)
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)
    except OSError as exc:
        raise RunAsError("cannot run the program as %s: %s" % (account.pw_name, exc.strerror or exc)) from None


def drop_empty_result(path: str) -> None:
    """The result file made for the account but never written: as if the program had written none."""
    try:
        if os.lstat(path).st_size == 0:
            os.unlink(path)
    except OSError:
        pass
