#!/usr/bin/env python3
"""CloudPivot Runner: start one attempt of a task, supervise it and report to CloudPivot.

One module of the Python standard library only (Python 3.8+, Linux), so it can be copied
into any image. The protocol and the guarantees are described in docs/runner.md.
"""

from __future__ import annotations

import argparse
import base64
import copy
import fcntl
import glob
import hashlib
import http.client
import ipaddress
import json
import os
import random
import re
import signal
import ssl
import stat
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

VERSION = "1.0"

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIG = 2
EXIT_REFUSED = 3
EXIT_LOCKED = 75  # EX_TEMPFAIL: another Runner holds the state directory
EXIT_INTERRUPTED = 130

HTTP_TIMEOUT = 10.0
BACKOFF_START = 0.5
BACKOFF_MAX = 10.0
REJECTED_GIVE_UP = 300.0  # seconds of unexplained 4xx answers before the Runner gives up
POLL = 0.2
LOG_BATCH_SECONDS = 0.5
LOG_CHUNK = 256 * 1024
EVENT_BATCH = 100
RESULT_MAX = 64 * 1024
STREAMS = ("stdout", "stderr")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_GRACE = 10.0
DEFAULT_HEARTBEAT = 2.0

ASSIGNMENT_PATH = "/runner/v1/assignment"
HEARTBEAT_PATH = "/runner/v1/heartbeat"
HEARTBEAT_MAX_SKIPS = 9  # a full heartbeat (with usage figures) at least every 10 intervals
EVENTS_PATH = "/runner/v1/events"
LOGS_PATH = "/runner/v1/logs"
BOOTSTRAP_PATH = "/runner/v1/bootstrap"

# Configuration keys, in the order of the table in docs/runner.md.
SETTINGS = {
    "server_url": "CLOUDPIVOT_SERVER_URL",
    "credential_file": "CLOUDPIVOT_CREDENTIAL_FILE",
    "ca_file": "CLOUDPIVOT_CA_FILE",
    "state_dir": "CLOUDPIVOT_STATE_DIR",
    "bootstrap_file": "CLOUDPIVOT_BOOTSTRAP_FILE",
}

HELP_EPILOG = """\
Settings come from the flags, else from the environment, else from the --config file:
  CLOUDPIVOT_SERVER_URL       base URL of CloudPivot (https://; http:// only for loopback)
  CLOUDPIVOT_CREDENTIAL_FILE  file holding the per-attempt bearer credential (cpr_...)
  CLOUDPIVOT_CA_FILE          CA bundle for the server's certificate (default: system store)
  CLOUDPIVOT_STATE_DIR        directory for the outbox, the program's output and the state
  CLOUDPIVOT_BOOTSTRAP_FILE   optional one-time bootstrap secret (cpb_...): when the credential
                              file does not exist yet, the Runner first exchanges this secret for
                              the credential, stores it (mode 600) and deletes the bootstrap file

The Runner fetches its assignment, starts the program through a shim in its own process
group, tails its stdout/stderr to the server, sends heartbeats and events, and exits once
the server has acknowledged everything. Restarted on the same state directory, it resumes
where the server is and re-attaches to a program that still runs.

exit codes:
  0   the attempt is reported (or the server closed it)
  1   internal error, or the server kept rejecting requests
  2   bad configuration
  3   the server refused the credential
  75  another Runner holds <state-dir>/runner.lock
"""

_log_lock = threading.Lock()


def log(message: str) -> None:
    """Diagnostics on stderr, UTC-stamped; never given the credential."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%03dZ" % int(now % 1 * 1000)
    with _log_lock:
        sys.stderr.write("cloudpivot-runner: %s %s\n" % (stamp, message))
        sys.stderr.flush()


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


def write_json_atomic(path: str, value, mode: int = 0o600) -> None:
    """A crash leaves either the old or the new file, never a torn one."""
    tmp = "%s.tmp-%d-%d" % (path, os.getpid(), threading.get_ident())
    write_synced(tmp, json.dumps(value, indent=1, sort_keys=True).encode(), mode)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


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


class Config:
    def __init__(self, server_url: str, credential_file: str, ca_file, state_dir: str, bootstrap_file=None):
        self.server_url = server_url
        self.credential_file = credential_file
        self.ca_file = ca_file
        self.state_dir = state_dir
        self.bootstrap_file = bootstrap_file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cloudpivot_runner.py",
        description="Start and supervise one attempt of a CloudPivot task and report what happens.",
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="JSON file with server_url, credential_file, ca_file, state_dir, bootstrap_file (lowest precedence)",
    )
    parser.add_argument("--server-url", dest="server_url", metavar="URL", help="base URL of CloudPivot")
    parser.add_argument(
        "--credential-file",
        dest="credential_file",
        metavar="FILE",
        help="file holding the per-attempt bearer credential",
    )
    parser.add_argument("--ca-file", dest="ca_file", metavar="FILE", help="CA bundle to verify the server with")
    parser.add_argument("--state-dir", dest="state_dir", metavar="DIR", help="the Runner's state directory")
    parser.add_argument(
        "--bootstrap-file",
        dest="bootstrap_file",
        metavar="FILE",
        help="one-time bootstrap secret, exchanged for the credential when the credential file does not exist yet",
    )
    parser.add_argument("--version", action="version", version="cloudpivot-runner " + VERSION)
    return parser


def read_config_file(path: str) -> dict:
    try:
        value = read_json(path)
    except (OSError, ValueError) as exc:
        raise ConfigError("cannot read the config file %s: %s" % (path, exc)) from None
    if value is None:
        raise ConfigError("the config file %s does not exist" % path)
    if not isinstance(value, dict):
        raise ConfigError("the config file %s must hold a JSON object" % path)
    unknown = sorted(set(value) - set(SETTINGS))
    if unknown:
        log("ignoring unknown keys in %s: %s" % (path, ", ".join(unknown)))
    return {key: value[key] for key in SETTINGS if value.get(key)}


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


def load_config(args: argparse.Namespace) -> Config:
    """Flags override environment variables, which override the --config file."""
    values = read_config_file(args.config) if args.config else {}
    for key, variable in SETTINGS.items():
        if os.environ.get(variable):
            values[key] = os.environ[variable]
        if getattr(args, key):
            values[key] = getattr(args, key)
    missing = [key for key in ("server_url", "credential_file", "state_dir") if not values.get(key)]
    if missing:
        raise ConfigError("missing setting(s): %s (see --help)" % ", ".join(missing))
    if any(not isinstance(value, str) for value in values.values()):
        raise ConfigError("every setting must be a string")
    return Config(
        server_url=check_server_url(values["server_url"]),
        credential_file=os.path.abspath(values["credential_file"]),
        ca_file=os.path.abspath(values["ca_file"]) if values.get("ca_file") else None,
        state_dir=os.path.abspath(values["state_dir"]),
        bootstrap_file=os.path.abspath(values["bootstrap_file"]) if values.get("bootstrap_file") else None,
    )


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


def bootstrap_credential(config: Config, ssl_context) -> str:
    """Exchange the one-time bootstrap secret for the attempt credential (docs/runner.md, "Bootstrap").

    The credential is stored (mode 600) before the bootstrap file is deleted: the secret works once,
    so losing the answer would leave this Runner without a credential.
    """
    try:
        secret = read_credential(config.bootstrap_file)
    except ConfigError as exc:
        raise ConfigError("bootstrap: %s" % exc) from None
    client = Client(config.server_url, secret, ssl_context, threading.Event())
    answer = client.call("POST", BOOTSTRAP_PATH, {})
    credential = answer.get("credential")
    if not isinstance(credential, str) or not credential or not credential.isprintable() or " " in credential:
        raise ConfigError("bootstrap: the server's answer holds no credential")
    directory = os.path.dirname(config.credential_file)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = "%s.tmp-%d" % (config.credential_file, os.getpid())
    write_synced(tmp, (credential + "\n").encode(), 0o600)
    os.replace(tmp, config.credential_file)
    fsync_dir(directory)
    os.unlink(config.bootstrap_file)
    log("exchanged the bootstrap secret for the attempt credential, stored in %s" % config.credential_file)
    return credential


def make_ssl_context(ca_file):
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("cannot load the CA file %s: %s" % (ca_file, exc)) from None


class LockHeld(Exception):
    pass


def acquire_lock(state_dir: str) -> int:
    """One Runner per state directory; the fd stays open (and locked) for the process life."""
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(state_dir, "runner.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LockHeld() from None
    os.ftruncate(fd, 0)
    os.write(fd, b"%d\n" % os.getpid())
    return fd


# --------------------------------------------------------------------------- HTTP


class CredentialRefused(Exception):
    """401/403: this credential will never work again; retrying is pointless."""


class AttemptClosed(Exception):
    """409 attempt_closed: the attempt is finished or superseded; stop reporting."""


class OffsetMismatch(Exception):
    """409 offset_mismatch: the server has fewer bytes than we thought; resend from `expected`."""

    def __init__(self, expected: int):
        super().__init__("offset mismatch, server expects %d" % expected)
        self.expected = expected


class ServerRejected(Exception):
    """The server kept answering 4xx that no retry fixed."""


class EventRefused(Exception):
    """400 with `rejected_seq`: the server will never take that event as it is; resending it is pointless."""

    def __init__(self, seq: int, message: str):
        super().__init__("event %d refused: %s" % (seq, message))
        self.seq = seq
        self.message = message


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an error, never followed: urllib would carry the Authorization header to the new place."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises the 3xx as an HTTPError


class Shutdown(Exception):
    """The Runner is ending: a background call gives up its retries."""


class TemporaryFailure(Exception):
    """No usable answer this time (network, 5xx, 429, unexplained 4xx): wait and try again."""

    def __init__(self, problem: str, rejected: bool = False, retry_after: float = 0.0):
        super().__init__(problem)
        self.rejected = rejected
        self.retry_after = retry_after


class Client:
    """JSON over HTTP(S) to CloudPivot, retrying until the server answers for real."""

    def __init__(self, base_url: str, credential: str, ssl_context, stopping: threading.Event):
        self.base_url = base_url
        self._credential = credential
        self.ssl_context = ssl_context if base_url.startswith("https:") else None
        handlers = [NoRedirects()]
        if self.ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=self.ssl_context))
        self.opener = urllib.request.build_opener(*handlers)
        self.stopping = stopping
        self.last_answer = 0.0  # time.monotonic() of the last answer: any answer proves we are heard
        self.on_stop_requested = None  # called when an answer says the server wants the program stopped

    def call(self, method: str, path: str, body=None) -> dict:
        delay = BACKOFF_START
        first_rejection = None
        while True:
            try:
                return self._call_once(method, path, body)
            except TemporaryFailure as failure:
                if failure.rejected:
                    first_rejection = first_rejection or time.monotonic()
                    if time.monotonic() - first_rejection > REJECTED_GIVE_UP:
                        raise ServerRejected("%s %s: %s" % (method, path, failure)) from None
                wait = max(delay * random.uniform(0.8, 1.0), min(failure.retry_after, 60.0))
                log("%s %s failed (%s); retrying in %.1f s" % (method, path, failure, wait))
            if self.stopping.wait(wait):
                raise Shutdown()
            delay = min(delay * 2, BACKOFF_MAX)

    def _call_once(self, method: str, path: str, body) -> dict:
        request = urllib.request.Request(
            self.base_url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Authorization": "Bearer " + self._credential,
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": "cloudpivot-runner/" + VERSION,
            },
        )
        try:
            with self.opener.open(request, timeout=HTTP_TIMEOUT) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise self._error_for(error) from None
        except (OSError, http.client.HTTPException) as error:
            raise TemporaryFailure("no answer: %s" % (getattr(error, "reason", None) or error)) from None
        try:
            answer = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            raise TemporaryFailure("the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise TemporaryFailure("the answer is not a JSON object")
        self.last_answer = time.monotonic()
        if answer.get("stop_requested") and self.on_stop_requested is not None:
            self.on_stop_requested()
        return answer

    @staticmethod
    def _error_for(error: urllib.error.HTTPError) -> Exception:
        """Turn an HTTP error answer into the exception that says what to do about it."""
        try:
            detail = json.loads(error.read().decode("utf-8"))
        except Exception:  # any unreadable body just means "no detail"
            detail = {}
        detail = detail if isinstance(detail, dict) else {}
        code, message = detail.get("code") or "", detail.get("message") or ""
        status = error.code
        if status in (401, 403):
            return CredentialRefused(
                "the server refused the credential (HTTP %d%s)" % (status, ": " + message if message else "")
            )
        if status == 409 and code == "attempt_closed":
            return AttemptClosed(message or "attempt closed")
        if status == 409 and code == "offset_mismatch" and isinstance(detail.get("expected_offset"), int):
            return OffsetMismatch(detail["expected_offset"])
        rejected_seq = detail.get("rejected_seq")
        if status == 400 and isinstance(rejected_seq, int) and not isinstance(rejected_seq, bool):
            return EventRefused(rejected_seq, str(message)[:500])
        if 300 <= status < 400:
            where = (error.headers.get("Location", "") if error.headers else "")[:200]
            return TemporaryFailure(
                "HTTP %d redirect to %r: redirects are never followed (they would carry the credential); "
                "give the final address as the server URL" % (status, where),
                rejected=True,
            )
        retry_after = error.headers.get("Retry-After", "") if error.headers else ""
        after = float(retry_after) if retry_after.isdigit() else 0.0
        text = "HTTP %d%s" % (status, " %s: %s" % (code, message) if code or message else "")
        return TemporaryFailure(text, rejected=status < 500 and status != 429, retry_after=after)


# --------------------------------------------------------------------------- durable state


class State:
    """The Runner's memory in state.json, so that a restarted Runner resumes instead of repeating."""

    DEFAULTS = {
        "version": 1,
        "next_seq": 1,
        "enqueued": [],  # keys of the one-off events already in the outbox (started, result, end...)
        "boot_id": None,
        "launch_begun": False,
        "shim_pid": None,
        "shim_start_time": None,
        "log_acked": {"stdout": 0, "stderr": 0},
        "stop_signals": [],
        "finished": False,
        "closed": False,
    }

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.RLock()
        self.data = copy.deepcopy(self.DEFAULTS)
        self.data.update(read_json(path, {}))

    def get(self, key: str):
        with self.lock:
            return copy.deepcopy(self.data[key])

    def update(self, **changes) -> None:
        with self.lock:
            self.data.update(changes)
            write_json_atomic(self.path, self.data)

    def set_log_offset(self, stream: str, offset: int) -> None:
        """Kept in memory only (written with the next state change): on a restart the assignment's
        log_offsets, the server's own lengths, are authoritative, so an fsync per log post buys nothing."""
        with self.lock:
            self.data["log_acked"] = dict(self.data["log_acked"], **{stream: offset})


class Outbox:
    """Events wait on disk (<state>/outbox/<seq>.json) until the server acknowledges them."""

    NAME = re.compile(r"^(\d{12})\.json$")

    def __init__(self, directory: str, state: State):
        self.directory = directory
        self.state = state
        self.lock = threading.Lock()
        self.changed = threading.Event()
        os.makedirs(directory, mode=0o700, exist_ok=True)

    def _path(self, seq: int) -> str:
        return os.path.join(self.directory, "%012d.json" % seq)

    def _seqs(self) -> list:
        return sorted(int(m.group(1)) for m in map(self.NAME.match, os.listdir(self.directory)) if m)

    def recover(self, server_acked: int) -> None:
        """Complete or undo enqueues cut by a crash, drop what the server has, align next_seq."""
        with self.lock:
            committed = self.state.get("next_seq")
            for name in os.listdir(self.directory):
                if name.endswith(".json.tmp"):
                    tmp = os.path.join(self.directory, name)
                    seq = int(name[:12])
                    if seq < committed:
                        os.replace(tmp, self._path(seq))
                    else:
                        os.unlink(tmp)
            self._drop(server_acked)
            next_seq = max([committed, server_acked + 1] + [seq + 1 for seq in self._seqs()])
            if next_seq != committed:
                self.state.update(next_seq=next_seq)

    def enqueue_once(self, key: str, kind: str, data: dict) -> None:
        """Write the event, commit it in state.json (seq and key together), then publish it."""
        with self.lock:
            enqueued = self.state.get("enqueued")
            if key in enqueued:
                return
            seq = self.state.get("next_seq")
            event = {"seq": seq, "type": kind, "time": utc_stamp(), "data": data}
            final = self._path(seq)
            write_synced(final + ".tmp", json.dumps(event).encode())
            self.state.update(next_seq=seq + 1, enqueued=enqueued + [key])  # the commit point
            os.replace(final + ".tmp", final)
            fsync_dir(self.directory)
        text = json.dumps(data)
        log("queued event %d: %s %s" % (seq, kind, text if len(text) <= 300 else text[:300] + "..."))
        self.changed.set()

    def pending(self, limit: int) -> list:
        with self.lock:
            events = []
            for seq in self._seqs()[:limit]:
                events.append(read_json(self._path(seq)))
            return events

    def drop_acked(self, acked_seq: int) -> None:
        with self.lock:
            self._drop(acked_seq)

    def _drop(self, acked_seq: int) -> None:
        for seq in self._seqs():
            if seq <= acked_seq:
                os.unlink(self._path(seq))

    def is_empty(self) -> bool:
        with self.lock:
            return not self._seqs()

    def replace_refused(self, seq: int, why: str) -> bool:
        """Put a stand-in the server can take in place of an event it refused, so the seqs stay contiguous.

        The refusal is recorded once (in the log, and in the stand-in the task's history shows); the
        refused event is not sent again. An `exited` or `lost` stays what it is, without its data, so
        the attempt still ends. A refused stand-in is replaced by a bare one. False if seq is not here.
        """
        with self.lock:
            event = read_json(self._path(seq)) if seq in self._seqs() else None
            if not isinstance(event, dict):
                return False
            note = "the server refused the Runner's %s event: %s" % (event.get("type"), why)
            if event.get("refused"):
                kind, data = "progress", {"message": "the server refused a Runner event"}
            elif event.get("type") == "exited":
                kind, data = "exited", {"exit_code": None, "signal": None, "reason": note}
            elif event.get("type") == "lost":
                kind, data = "lost", {"reason": note}
            else:
                kind, data = "progress", {"message": note}
            stand_in = {"seq": seq, "type": kind, "time": utc_stamp(), "data": data, "refused": True}
            write_synced(self._path(seq) + ".swap", json.dumps(stand_in).encode())
            os.replace(self._path(seq) + ".swap", self._path(seq))
            fsync_dir(self.directory)
        log("the server refused event %d (%s): %s; it is not sent again" % (seq, event.get("type"), why))
        return True


# --------------------------------------------------------------------------- declared outputs (docs/data.md)
# Shared by the host agent's supervisor (every `local` attempt) and, later, this Runner in a VM: after the
# program ends, whatever the outcome, the files the task declared are copied to the store target the
# assignment names, SHA-256 computed while copying, and a manifest is reported as the `outputs` event.
# A file that cannot be kept is listed as missing with the reason; it never changes the exit code.

OUTPUT_MAX_FILES = 500  # the manifest must fit one event (256 KiB of JSON)
OUTPUT_MAX_NAME = 200
OUTPUT_CHUNK = 1024 * 1024
OUTPUTS_FILE = "outputs.json"


class OutputError(Exception):
    """One output that cannot be kept; the message is the reason the manifest gives."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _name_problem(name: str) -> str:
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") for part in parts):
        return "not a path inside the work directory"
    if len(name) > OUTPUT_MAX_NAME:
        return "its name is longer than %d characters" % OUTPUT_MAX_NAME
    return ""


def outputs_match(workdir: str, declared: list):
    """The files the declared outputs match, as [(stored name, path)], each name once, and the misses.

    A pattern is a glob relative to the work directory; a directory it matches stands for every file under
    it. Symbolic links are never followed out of the work directory (the copy checks where the file is)."""
    root = os.path.realpath(workdir)
    found, missing, names = [], [], set()
    for entry in declared or []:
        pattern, to = str(entry.get("path") or ""), str(entry.get("to") or "").strip("/")
        problem = _name_problem(pattern.replace("*", "x").replace("?", "x")) or (to and _name_problem(to))
        if problem:
            missing.append({"name": pattern, "reason": problem})
            continue
        paths = []
        for path in sorted(glob.glob(os.path.join(glob.escape(root), pattern))):
            if os.path.isdir(path) and not os.path.islink(path):
                for top, dirs, files in os.walk(path):
                    dirs.sort()
                    paths += [os.path.join(top, name) for name in sorted(files)]
            else:
                paths.append(path)
        if not paths:
            missing.append({"name": pattern, "reason": "no file matches it in the work directory"})
        for path in paths:
            relative = os.path.relpath(path, root)
            name = to + "/" + relative if to else relative
            if name in names:
                continue
            names.add(name)
            problem = _name_problem(name)
            if problem:
                missing.append({"name": name[:OUTPUT_MAX_NAME], "reason": problem})
            elif len(found) >= OUTPUT_MAX_FILES:
                missing.append({"name": name, "reason": "more than %d files are declared" % OUTPUT_MAX_FILES})
            else:
                found.append((name, path))
    return found, missing


def output_copy(path: str, root: str, destination: str, owner=None):
    """Copy one file to `destination` (atomically: a temporary name, then renamed), hashing as it goes.

    Returns (bytes, sha256 hex); raises OutputError. `owner`: the uid the file must belong to (programs run
    as another account: a root copier must not pick up what the account could only link to)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise OutputError("cannot be read: %s" % (exc.strerror or exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OutputError("not a regular file")
        if owner is not None and info.st_uid != owner:
            raise OutputError("not owned by the program's account")
        try:
            real = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            real = os.path.realpath(path)
        if not _inside(real, os.path.realpath(root)):
            raise OutputError("it leads outside the work directory")
        digest, size = hashlib.sha256(), 0
        tmp = "%s.part-%d" % (destination, os.getpid())
        try:
            os.makedirs(os.path.dirname(destination), mode=0o700, exist_ok=True)
            with os.fdopen(os.dup(fd), "rb") as source, open(tmp, "wb") as target:
                while True:
                    chunk = source.read(OUTPUT_CHUNK)
                    if not chunk:
                        break
                    digest.update(chunk)
                    target.write(chunk)
                    size += len(chunk)
            os.replace(tmp, destination)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise OutputError("could not be stored: %s" % (exc.strerror or exc)) from None
        return size, digest.hexdigest()
    finally:
        os.close(fd)


def collect_outputs(workdir: str, outputs: dict, owner=None) -> dict:
    """Copy the declared outputs to the assignment's store target; return the manifest (the `outputs` event).

    The manifest: {"files": [{name, bytes, sha256, ref}], "missing": [{name, reason}], "complete", "reason"}."""
    store = (outputs or {}).get("store") or {}
    files, missing = [], []
    try:
        found, missing = outputs_match(workdir, (outputs or {}).get("declared") or [])
    except OSError as exc:
        found, missing = [], [{"name": "*", "reason": "the work directory cannot be read: %s" % exc}]
    if found and store.get("kind") != "directory":
        # A store this program cannot write to (an object store's upload URLs come in a later version).
        why = "this host program cannot write to a %r store" % store.get("kind")
        missing += [{"name": name, "reason": why} for name, _ in found]
        found = []
    for name, path in found:
        try:
            size, sha = output_copy(path, workdir, os.path.join(str(store.get("path")), name), owner)
        except OutputError as exc:
            missing.append({"name": name, "reason": str(exc)})
            continue
        files.append({"name": name, "bytes": size, "sha256": sha, "ref": name})
    reason = ""
    if missing:
        reason = "%d of %d outputs not kept: %s" % (len(missing), len(missing) + len(files), missing[0]["reason"])
    return {"files": files, "missing": missing, "complete": not missing, "reason": reason[:2000]}


def outputs_event(directory: str, assignment: dict):
    """The `outputs` event's data for an attempt that declared outputs (None otherwise): the supervisor's
    manifest, or why there is none (it ended before it finished collecting)."""
    if not (assignment.get("outputs") or {}).get("declared"):
        return None
    try:
        manifest = read_json(os.path.join(directory, OUTPUTS_FILE))
    except ValueError:
        manifest = None
    if isinstance(manifest, dict):
        return manifest
    why = "the outputs were not collected: the supervisor ended before it had copied them"
    return {"files": [], "missing": [], "complete": False, "reason": why}


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


def peak_rss_kb(pid: int) -> int:
    try:
        with open("/proc/%d/status" % pid) as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def group_usage(pgid: int):
    """CPU seconds and peak RSS of the processes in the program's process group (best effort)."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu, rss = 0, 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = read_proc_stat(int(name))
        if fields and fields[5 - 3] == str(pgid):
            cpu += sum(int(value) for value in fields[14 - 3 : 18 - 3])  # utime stime cutime cstime
            rss = max(rss, peak_rss_kb(int(name)))
    return cpu / ticks, rss


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


class Program:
    """The shim (session and process group leader) and, through it, the user's program."""

    def __init__(self, state_dir: str, state: State):
        self.state_dir = state_dir
        self.state = state
        self.child = None  # subprocess.Popen while the shim is our own child

    def path(self, name: str) -> str:
        return os.path.join(self.state_dir, name)

    @property
    def pid(self):
        return self.state.get("shim_pid")

    def launch(self, spec: dict) -> None:
        """Start the shim; its pid is on disk right after, so a restarted Runner finds it."""
        write_json_atomic(self.path("launch.json"), spec)
        for name in ("exit.json", "result.json"):
            if os.path.exists(self.path(name)):
                os.unlink(self.path(name))
        for stream in STREAMS:
            open(self.path(stream + ".log"), "ab").close()
        self.state.update(launch_begun=True, boot_id=read_boot_id())
        with open(self.path("stderr.log"), "ab") as shim_stderr:
            self.child = subprocess.Popen(
                [sys.executable, "-I", os.path.abspath(__file__), "--exec-shim", self.state_dir],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=shim_stderr,
                cwd=self.state_dir,
                env=base_environment(),
                start_new_session=True,
            )
        pid = self.child.pid
        self.state.update(shim_pid=pid, shim_start_time=proc_start_time(pid))
        log("started the program through the shim (pid %d)" % pid)

    def alive(self) -> bool:
        if self.child is not None:
            return self.child.poll() is None
        pid = self.pid
        if pid is None or self.state.get("boot_id") != read_boot_id():
            return False
        fields = read_proc_stat(pid)
        return bool(fields) and fields[0] != "Z" and int(fields[22 - 3]) == self.state.get("shim_start_time")

    def signal_group(self, number: int) -> None:
        if self.alive():
            try:
                os.killpg(self.pid, number)
            except ProcessLookupError:
                pass

    def exit_status(self):
        try:
            return read_json(self.path("exit.json"))
        except ValueError:
            return None

    def outcome(self, grace: float):
        """After the shim is gone: ("exited", data) from exit.json, or ("lost", data)."""
        status = self.exit_status()
        stop_signals = self.state.get("stop_signals")
        if status is None and "SIGKILL" in stop_signals:
            status = {"exit_code": None, "signal": int(signal.SIGKILL)}  # we killed the shim too
        if status is None:
            reason = "the program vanished without an exit status"
            code = self.child.returncode if self.child is not None else None
            if code is not None and code < 0:
                reason += " (its shim was killed by %s)" % signal_name(-code)
            return "lost", {"reason": reason}
        return "exited", exit_data(status, stop_signals, grace)


class Stopper:
    """A stop request: SIGTERM to the program's process group, SIGKILL once the grace is over."""

    def __init__(self, program: Program, state: State, grace: float):
        self.program = program
        self.state = state
        self.grace = grace
        self.deadline = None

    def _send(self, number: int) -> None:
        self.state.update(stop_signals=self.state.get("stop_signals") + [signal_name(number)])
        log("sending %s to the program's process group" % signal_name(number))
        self.program.signal_group(number)

    def step(self) -> None:
        if self.deadline is None:
            self._send(signal.SIGTERM)
            self.deadline = time.monotonic() + self.grace
        elif time.monotonic() >= self.deadline and "SIGKILL" not in self.state.get("stop_signals"):
            self._send(signal.SIGKILL)


def result_data(value) -> dict:
    """The result file's JSON as a `result` event: its own shape if it has it, else the summary."""
    if isinstance(value, dict) and "summary" in value and set(value) <= {"summary", "refs"}:
        refs = value.get("refs", [])
        if isinstance(refs, list) and all(isinstance(ref, str) for ref in refs):
            return {"summary": value["summary"], "refs": refs}
    return {"summary": value, "refs": []}


def reject_constant(name: str):
    raise ValueError("%s is not JSON" % name)


# --------------------------------------------------------------------------- background workers


class Worker(threading.Thread):
    """A background loop whose failure goes to the main thread instead of dying silently."""

    def __init__(self, runner: "Runner", name: str):
        super().__init__(name=name, daemon=True)
        self.runner = runner

    def run(self) -> None:
        try:
            while not self.runner.stopping.is_set():
                self.step()
        except Shutdown:
            pass
        except BaseException as exc:  # handed over to the main thread, which re-raises it
            self.runner.fail(exc)

    def step(self) -> None:
        raise NotImplementedError


class EventSender(Worker):
    """Sends the outbox in seq order and deletes what the server acknowledged."""

    def step(self) -> None:
        outbox = self.runner.outbox
        outbox.changed.clear()
        events = outbox.pending(EVENT_BATCH)
        if not events:
            outbox.changed.wait(0.5)
            return
        try:
            answer = self.runner.client.call("POST", EVENTS_PATH, {"events": [wire(event) for event in events]})
        except EventRefused as refused:
            if not outbox.replace_refused(refused.seq, refused.message):
                raise ServerRejected(str(refused)) from None
            return
        acked = answer.get("acked_seq")
        if isinstance(acked, int):
            outbox.drop_acked(acked)
        if not isinstance(acked, int) or acked < events[0]["seq"]:
            log("the server did not acknowledge event %d (acked_seq %r); resending soon" % (events[0]["seq"], acked))
            self.runner.stopping.wait(1.0)


def wire(event: dict) -> dict:
    """An outbox event as it is sent (the outbox's own marks stay on disk)."""
    return {key: event[key] for key in ("seq", "type", "time", "data") if key in event}


class LogShipper(Worker):
    """Tails stdout.log and stderr.log and appends them to the server at the acknowledged offsets."""

    def __init__(self, runner: "Runner", name: str):
        super().__init__(runner, name)
        self.poke = threading.Event()

    def step(self) -> None:
        shipped = [self.ship(stream) for stream in STREAMS]
        if "full" in shipped:
            return  # more is waiting: send it at once
        # After quiet, a new line goes out within POLL; while output flows it is batched, so that
        # many Runners streaming at once cost the server a few requests per second each.
        self.poke.wait(LOG_BATCH_SECONDS if "some" in shipped else POLL)
        self.poke.clear()

    def ship(self, stream: str) -> str:
        """Send what is new in one stream: "" (nothing new), "some", or "full" (a full chunk; more waits)."""
        offset = self.runner.state.get("log_acked")[stream]
        try:
            with open(os.path.join(self.runner.state_dir, stream + ".log"), "rb") as handle:
                handle.seek(offset)
                data = handle.read(LOG_CHUNK)
        except FileNotFoundError:
            return ""
        if not data:
            return ""
        body = {"stream": stream, "offset": offset, "data": base64.b64encode(data).decode("ascii")}
        try:
            next_offset = int(self.runner.client.call("POST", LOGS_PATH, body)["next_offset"])
        except OffsetMismatch as mismatch:
            log("%s: the server expects offset %d, not %d" % (stream, mismatch.expected, offset))
            next_offset = mismatch.expected
        except (KeyError, TypeError, ValueError):
            log("%s: the server's answer has no next_offset; resending soon" % stream)
            self.runner.stopping.wait(1.0)
            return ""
        self.runner.state.set_log_offset(stream, next_offset)
        if next_offset == offset:
            return ""
        return "full" if len(data) == LOG_CHUNK else "some"

    def caught_up(self, targets: dict) -> bool:
        acked = self.runner.state.get("log_acked")
        return all(acked[stream] >= targets[stream] for stream in STREAMS)


class Heartbeat(Worker):
    """Tells the server the Runner and the program are alive, and learns of stop requests."""

    def step(self) -> None:
        runner = self.runner
        if "end" in runner.state.get("enqueued"):  # the program is over: only the outbox matters now
            runner.stopping.wait(runner.heartbeat_interval)
            return
        quiet = time.monotonic() - runner.client.last_answer
        self.skipped = getattr(self, "skipped", HEARTBEAT_MAX_SKIPS)  # the first one always goes (boot id, pid)
        if quiet < runner.heartbeat_interval and self.skipped < HEARTBEAT_MAX_SKIPS:
            # The server heard from us (logs, events) and answered with the stop flag: no need to knock.
            self.skipped += 1
        else:
            self.skipped = 0
            answer = runner.client.call("POST", HEARTBEAT_PATH, runner.heartbeat_body())
            if isinstance(answer.get("acked_seq"), int):
                runner.outbox.drop_acked(answer["acked_seq"])
        runner.stopping.wait(runner.heartbeat_interval)


# --------------------------------------------------------------------------- the Runner


class Runner:
    """Runs one attempt from assignment to the acknowledged end event, resuming after restarts."""

    def __init__(self, config: Config, credential: str, ssl_context):
        self.state_dir = config.state_dir
        self.stopping = threading.Event()  # the background workers must end
        self.stop_requested = threading.Event()  # the server asked to stop the program
        self.wake = threading.Event()
        self.fatal = None
        self.fatal_lock = threading.Lock()
        self.state = State(os.path.join(self.state_dir, "state.json"))
        self.outbox = Outbox(os.path.join(self.state_dir, "outbox"), self.state)
        self.client = Client(config.server_url, credential, ssl_context, self.stopping)
        self.program = Program(self.state_dir, self.state)
        self.assignment = {}
        self.grace = DEFAULT_GRACE
        self.heartbeat_interval = DEFAULT_HEARTBEAT
        self.usage = {"cpu_seconds": 0.0, "max_rss_kb": 0}
        self.shipper = LogShipper(self, "log-shipper")
        self.client.on_stop_requested = self.request_stop

    # ---- coordination between threads

    def fail(self, exc: BaseException) -> None:
        with self.fatal_lock:
            self.fatal = self.fatal or exc
        self.wake.set()

    def check_fatal(self) -> None:
        if self.fatal is not None:
            raise self.fatal

    def pause(self) -> None:
        self.check_fatal()
        self.wake.wait(POLL)
        self.wake.clear()

    def request_stop(self) -> None:
        if not self.stop_requested.is_set():
            log("the server requested a stop")
            self.stop_requested.set()
            self.wake.set()

    def heartbeat_body(self) -> dict:
        pid = self.program.pid
        if pid is None:
            child_state = "not_started"
        elif self.program.alive():
            child_state = "running"
            cpu, rss = group_usage(pid)
            self.usage = {
                "cpu_seconds": round(max(cpu, self.usage["cpu_seconds"]), 3),
                "max_rss_kb": max(rss, self.usage["max_rss_kb"]),
            }
        else:
            child_state = "exited"
        return {
            "boot_id": read_boot_id(),
            "pid": os.getpid(),
            "child": {"pid": pid, "state": child_state},
            "usage": self.usage,
        }

    # ---- the run

    def run(self) -> int:
        if self.state.get("finished") and (self.state.get("closed") or self.outbox.is_empty()):
            log("this attempt is already reported; nothing to do")
            return EXIT_OK
        try:
            self.resume(self.client.call("GET", ASSIGNMENT_PATH))
            for worker in (EventSender(self, "event-sender"), self.shipper, Heartbeat(self, "heartbeat")):
                worker.start()
            if "end" not in self.state.get("enqueued"):
                self.report_program()
            self.flush_outbox()
            self.state.update(finished=True)
            log("everything is reported; exiting")
            return EXIT_OK
        except AttemptClosed:
            self.close_attempt()
            return EXIT_OK
        finally:
            self.stopping.set()

    def resume(self, assignment: dict) -> None:
        """Line up with what the server already has: events, log offsets, stop request."""
        self.assignment = assignment
        self.grace = float(assignment.get("stop_grace_seconds") or DEFAULT_GRACE)
        self.heartbeat_interval = min(max(float(assignment.get("heartbeat_interval") or DEFAULT_HEARTBEAT), 0.2), 300)
        self.outbox.recover(int(assignment.get("acked_seq") or 0))
        offsets = assignment.get("log_offsets") or {}
        acked = self.state.get("log_acked")
        self.state.update(log_acked={stream: int(offsets.get(stream, acked[stream])) for stream in STREAMS})
        log(
            "assignment for attempt %s: resuming after event %s, log offsets %s"
            % (assignment.get("attempt"), assignment.get("acked_seq"), self.state.get("log_acked"))
        )
        if assignment.get("stop_requested"):
            self.request_stop()

    def report_program(self) -> None:
        """Get the program's end, then its remaining output, result and end event, in that order."""
        kind, data = self.program_outcome()
        self.drain_logs()
        if kind == "exited" and self.program.pid is not None:
            self.report_result()
        self.outbox.enqueue_once("end", kind, data)

    def program_outcome(self):
        if self.program.pid is not None:
            return self.reattach()
        if self.state.get("launch_begun"):
            return "lost", {"reason": "the Runner stopped while starting the program"}
        if self.stop_requested.is_set():
            return "exited", {"exit_code": None, "signal": None, "reason": "stopped before start"}
        self.program.launch(self.launch_spec())
        self.outbox.enqueue_once("started", "started", {"pid": self.program.pid})
        return self.supervise()

    def reattach(self):
        """A Runner restarted with a program launched: find it again, or say honestly it is lost."""
        self.outbox.enqueue_once("started", "started", {"pid": self.program.pid})
        if self.state.get("boot_id") != read_boot_id():
            return "lost", {"reason": "the host rebooted while the program ran", "interrupted": True}
        if self.program.exit_status() is None and self.program.alive():
            log("re-attached to the running program (shim pid %d)" % self.program.pid)
            return self.supervise()
        return self.program.outcome(self.grace)

    def launch_spec(self) -> dict:
        assignment = self.assignment
        workdir = assignment.get("workdir") or os.path.join(self.state_dir, "work")
        if not assignment.get("workdir"):
            os.makedirs(workdir, mode=0o700, exist_ok=True)
        env = base_environment()
        env.update({str(key): str(value) for key, value in (assignment.get("env") or {}).items() if value is not None})
        env.pop("CLOUDPIVOT_CREDENTIAL_FILE", None)
        env.update(
            {
                "CLOUDPIVOT_TASK_ID": str(assignment.get("task_id") or ""),
                "CLOUDPIVOT_ATTEMPT": str(assignment.get("attempt") or ""),
                "CLOUDPIVOT_RESULT_FILE": os.path.join(self.state_dir, "result.json"),
            }
        )
        return {
            "argv": assignment.get("argv") or [],
            "env": env,
            "workdir": workdir,
            "secret_files": assignment.get("secret_files") or [],
            "secret_error": str(assignment.get("secret_error") or ""),
        }

    def supervise(self):
        """Wait for the shim to end, carrying out a stop request meanwhile."""
        stopper = Stopper(self.program, self.state, self.grace)
        while self.program.alive():
            if self.stop_requested.is_set():
                stopper.step()
            self.pause()
        return self.program.outcome(self.grace)

    def drain_logs(self) -> None:
        """`exited` goes last: first every byte the program wrote must be on the server."""
        targets = {stream: file_size(os.path.join(self.state_dir, stream + ".log")) for stream in STREAMS}
        self.shipper.poke.set()
        while not self.shipper.caught_up(targets):
            self.pause()

    def report_result(self) -> None:
        try:
            with open(os.path.join(self.state_dir, "result.json"), "rb") as handle:
                raw = handle.read(RESULT_MAX + 1)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.ignore_result("cannot read it (%s)" % exc.strerror)
            return
        if len(raw) > RESULT_MAX:
            self.ignore_result("it is larger than 64 KiB")
            return
        try:
            value = json.loads(raw.decode("utf-8"), parse_constant=reject_constant)
        except ValueError as exc:
            self.ignore_result("it is not valid JSON (%s)" % exc)
            return
        self.outbox.enqueue_once("result", "result", result_data(value))

    def ignore_result(self, why: str) -> None:
        self.outbox.enqueue_once("result", "progress", {"message": "the result file was ignored: " + why})

    def flush_outbox(self) -> None:
        self.outbox.changed.set()
        while not self.outbox.is_empty():
            self.pause()

    def close_attempt(self) -> None:
        """The server closed the attempt: stop the program if it runs, then report nothing more."""
        log("the server says this attempt is closed (finished or superseded); stopping")
        stopper = Stopper(self.program, self.state, self.grace)
        while self.program.alive():
            stopper.step()
            time.sleep(POLL)
        self.state.update(finished=True, closed=True)


# --------------------------------------------------------------------------- the shim


def _ignore_signal(number, frame) -> None:
    """A handler (not SIG_IGN): the shim survives, and exec resets it so the program does not."""


def shim_failure(code: int, message: str) -> dict:
    return {"exit_code": code, "signal": None, "error": message}


def shim_run(state_dir: str) -> dict:
    """Start the program as described in launch.json and wait for it; returns its exit status."""
    try:
        spec = read_json(os.path.join(state_dir, "launch.json"))
        argv, env, workdir = spec["argv"], spec["env"], spec["workdir"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return shim_failure(126, "cannot read the launch description: %s" % exc)
    if not isinstance(argv, list) or not argv or not all(isinstance(arg, str) for arg in argv):
        return shim_failure(127, "the assignment has no valid command (argv must be a non-empty list of strings)")
    if not os.path.isdir(workdir):
        return shim_failure(126, "working directory not found: %s" % workdir)
    if spec.get("secret_error"):
        return shim_failure(127, spec["secret_error"])
    problem = write_secret_files(spec.get("secret_files"))
    if problem:
        return shim_failure(126, problem)
    out_path, err_path = os.path.join(state_dir, "stdout.log"), os.path.join(state_dir, "stderr.log")
    with open(out_path, "ab") as out, open(err_path, "ab") as err:
        try:
            program = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=workdir, env=env)
        except FileNotFoundError:
            return shim_failure(127, "command not found: %s" % argv[0])
        except PermissionError:
            return shim_failure(126, "permission denied: %s" % argv[0])
        except OSError as exc:
            return shim_failure(126, "cannot start %s: %s" % (argv[0], exc.strerror or exc))
    code = program.wait()
    return {"exit_code": code, "signal": None} if code >= 0 else {"exit_code": None, "signal": -code}


def shim_main(args: list) -> int:
    """`--exec-shim STATE_DIR`: runs as session and process group leader, in the program's group."""
    if not args:
        sys.stderr.write("usage: cloudpivot_runner.py --exec-shim STATE_DIR\n")
        return EXIT_CONFIG
    state_dir = args[0]
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, _ignore_signal)
    status = shim_run(state_dir)
    if status.get("error"):
        with open(os.path.join(state_dir, "stderr.log"), "ab") as err:
            err.write(("cloudpivot-runner: %s\n" % status["error"]).encode("utf-8", "replace"))
    write_json_atomic(os.path.join(state_dir, "exit.json"), status)
    return EXIT_OK


# --------------------------------------------------------------------------- entry point


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--exec-shim"]:
        return shim_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args)
        ssl_context = make_ssl_context(config.ca_file)
        bootstrap = bool(config.bootstrap_file) and not os.path.exists(config.credential_file)
        credential = None if bootstrap else read_credential(config.credential_file)
    except ConfigError as exc:
        log("configuration error: %s" % exc)
        return EXIT_CONFIG
    try:
        lock_fd = acquire_lock(config.state_dir)  # noqa: F841 - held open until the process ends
    except LockHeld:
        log("another Runner holds %s; exiting" % os.path.join(config.state_dir, "runner.lock"))
        return EXIT_LOCKED
    except OSError as exc:
        log("configuration error: cannot use the state directory %s: %s" % (config.state_dir, exc))
        return EXIT_CONFIG
    try:
        if credential is None:
            credential = bootstrap_credential(config, ssl_context)
        return Runner(config, credential, ssl_context).run()
    except ConfigError as exc:
        log("configuration error: %s" % exc)
        return EXIT_CONFIG
    except CredentialRefused as exc:
        if credential is None:
            log("%s; the bootstrap secret in %s is not (or no longer) valid" % (exc, config.bootstrap_file))
        else:
            log("%s; the credential in %s is not (or no longer) valid for this attempt" % (exc, config.credential_file))
        return EXIT_REFUSED
    except ServerRejected as exc:
        log("giving up, the server keeps rejecting requests: %s" % exc)
        return EXIT_ERROR
    except KeyboardInterrupt:
        log("interrupted; a program already started keeps running and a restarted Runner re-attaches to it")
        return EXIT_INTERRUPTED
    except Exception:  # last resort: say what broke
        log("internal error:\n" + traceback.format_exc())
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
