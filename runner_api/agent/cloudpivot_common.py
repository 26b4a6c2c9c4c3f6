"""What every CloudPivot host program shares: the host agent (`cloudpivot_agent.py`), its supervisor, and the
boot of a task VM (`cloudpivot_boot.py`): server URL and credential checks, /proc, exit descriptions, files.

Standard library only, Python 3.8+ (docs/runner.md), Linux.
"""

from __future__ import annotations

import ipaddress
import json
import os
import platform
import signal
import ssl
import time
import urllib.parse

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_GRACE = 10.0


def utc_stamp() -> str:
    """Event times to the microsecond: start-up phases are often less than a second apart."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%06dZ" % int(now % 1 * 1000000)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


# --------------------------------------------------------------------------- files


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: str, data: bytes, mode: int = 0o600) -> None:
    """Write and fsync a file (not atomically: callers rename it into place)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def read_json(path: str, default=None):
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))
    except FileNotFoundError:
        return default


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# --------------------------------------------------------------------------- configuration


class ConfigError(Exception):
    pass


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_server_url(url: str) -> str:
    """Refuse to send the credential in clear text anywhere but to this very machine."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError("the server URL must be an absolute https:// URL, not %r" % url)
    if parts.query or parts.fragment:
        raise ConfigError("the server URL must not have a query or a fragment: %r" % url)
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ConfigError(
            "plain http:// is accepted only for loopback hosts (127.0.0.0/8, ::1, localhost); "
            "use https:// for %s" % parts.hostname
        )
    return url.rstrip("/")


def read_credential(path: str) -> str:
    try:
        with open(path, "r", encoding="utf-8") as handle:
            value = handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise ConfigError("cannot read the credential file %s: %s" % (path, why)) from None
    if not value or not value.isprintable() or any(char.isspace() for char in value):
        raise ConfigError("the credential file %s must hold exactly one token" % path)
    return value


def make_ssl_context(ca_file):
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("cannot load the CA file %s: %s" % (ca_file, exc)) from None


# --------------------------------------------------------------------------- /proc


def read_proc_stat(pid: int):
    """Fields 3.. of /proc/<pid>/stat (the command name may hold spaces and parentheses)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def proc_start_time(pid: int):
    fields = read_proc_stat(pid)
    return int(fields[22 - 3]) if fields else None


def read_boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


_HOST_FACTS = {}


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (x86: "model name"; some ARM kernels: "Model"), else the machine."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return value.strip()[:200]
    except OSError:
        pass
    return platform.machine()


def started_data(pid, version: str) -> dict:
    """A `started` event's data: the program's pid and the host's facts, for the attempt's provenance bundle."""
    if not _HOST_FACTS:
        _HOST_FACTS.update(kernel=platform.release()[:200], cpu_model=cpu_model())
    facts = dict(_HOST_FACTS, agent_version=version, boot_id=read_boot_id())
    return {"pid": pid, "host": facts}


# --------------------------------------------------------------------------- the program


def base_environment() -> dict:
    return {
        "PATH": os.environ.get("PATH") or DEFAULT_PATH,
        "HOME": os.environ.get("HOME") or "/",
        "LANG": os.environ.get("LANG") or "C.UTF-8",
    }


def exit_data(status: dict, stop_signals: list, grace: float) -> dict:
    """The `exited` event: the exit status and a sentence a person can read."""
    code, number = status.get("exit_code"), status.get("signal")
    if status.get("error"):
        reason = status["error"]
    elif number is not None:
        if number == signal.SIGKILL and "SIGKILL" in stop_signals:
            reason = "stopped on request (SIGKILL after the %g s grace period)" % grace
        elif number == signal.SIGTERM and stop_signals:
            reason = "stopped on request (SIGTERM)"
        else:
            reason = "killed by signal %d (%s)" % (number, signal_name(number))
            reason += " after a stop request" if stop_signals else ""
    else:
        reason = "exited with code %s" % code
        reason += " after a stop request" if stop_signals else ""
    return {"exit_code": code, "signal": number, "reason": reason}


def write_secret_files(files) -> str:
    """Write the project secrets the assignment delivers as files (mode 0600, the program's own user).

    Called by whoever is about to exec the program, after any drop of privileges, so a path the program's
    user may not write to is refused as it would be for the program itself. Returns "" or what failed.
    """
    for item in files or []:
        path = str(item.get("path") or "")
        try:
            if not path.startswith("/"):
                raise OSError("not an absolute path")
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.fchmod(fd, 0o600)  # a file that was there keeps its old mode otherwise
                data = memoryview(str(item.get("content") or "").encode("utf-8"))
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
        except OSError as exc:
            return "cannot write the secret file %s: %s" % (path, exc.strerror or exc)
    return ""


def result_data(value) -> dict:
    """The result file's JSON as a `result` event: its own shape if it has it, else the summary."""
    if isinstance(value, dict) and "summary" in value and set(value) <= {"summary", "refs"}:
        refs = value.get("refs", [])
        if isinstance(refs, list) and all(isinstance(ref, str) for ref in refs):
            return {"summary": value["summary"], "refs": refs}
    return {"summary": value, "refs": []}


def reject_constant(name: str):
    raise ValueError("%s is not JSON" % name)
