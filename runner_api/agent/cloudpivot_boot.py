"""How the host program learns where it reports and with what credential, on a CloudPivot host or in a task VM.

On the `local` cloud's host the flags say it all. In a task VM, cloud-init writes a JSON config file and a
one-time bootstrap secret (`cpb_…`, never the credential: user data can be read back), and the program
exchanges the secret for the attempt's credential (`cpr_…`) before its first sync (docs/runner.md,
"Bootstrap"). Flags override environment variables, which override the config file.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import time
import urllib.parse

try:  # run as a script or from the zipapp (its sibling modules beside it), or imported as a package module
    from cloudpivot_agent_log import KEEP, MAX_BYTES, log
    from cloudpivot_common import ConfigError, check_server_url, fsync_dir, read_credential, read_json, write_synced
    from cloudpivot_sync import VERSION, Refused
except ImportError:  # pragma: no cover - import path of the tests
    from runner_api.agent.cloudpivot_agent_log import KEEP, MAX_BYTES, log
    from runner_api.agent.cloudpivot_common import (
        ConfigError,
        check_server_url,
        fsync_dir,
        read_credential,
        read_json,
        write_synced,
    )
    from runner_api.agent.cloudpivot_sync import VERSION, Refused

BOOTSTRAP_PATH = "/runner/v2/bootstrap"
BOOTSTRAP_GIVE_UP = 3600.0  # a VM's network may come up late; the server's boot deadline ends the attempt first
SETTINGS = {  # setting → environment variable
    "server_url": "CLOUDPIVOT_SERVER_URL",
    "credential_file": "CLOUDPIVOT_CREDENTIAL_FILE",
    "bootstrap_file": "CLOUDPIVOT_BOOTSTRAP_FILE",
    "state_dir": "CLOUDPIVOT_STATE_DIR",
    "ca_file": "CLOUDPIVOT_CA_FILE",
    "name": "CLOUDPIVOT_AGENT_NAME",
}
REQUIRED = ("server_url", "credential_file", "state_dir")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cloudpivot_agent.py", description="Run the attempts this host is given by CloudPivot (docs/runner.md)."
    )
    parser.add_argument("--config", metavar="FILE", help="JSON file with the settings below in snake_case (lowest)")
    parser.add_argument("--server-url", dest="server_url", help="base URL of CloudPivot")
    parser.add_argument("--credential-file", dest="credential_file", help="file holding the credential (cpa_/cpr_)")
    parser.add_argument(
        "--bootstrap-file",
        dest="bootstrap_file",
        help="one-time bootstrap secret (cpb_…), exchanged for the credential when the credential file is missing",
    )
    parser.add_argument("--state-dir", dest="state_dir", help="the runs directory: one directory per attempt")
    parser.add_argument("--name", help="the agent's name, as the server derived its credential (default: host name)")
    parser.add_argument("--ca-file", dest="ca_file", help="CA bundle to verify the server with")
    parser.add_argument(
        "--detach", action="store_true", help="run in the background (own session); return once the agent is up"
    )
    parser.add_argument("--log-max-bytes", type=int, default=MAX_BYTES, help="rotate agent.log at this size")
    parser.add_argument("--log-keep", type=int, default=KEEP, help="rotated agent.log files kept (agent.log.1 …)")
    parser.add_argument("--version", action="version", version="cloudpivot-agent " + VERSION)
    return parser


def settle(args: argparse.Namespace) -> argparse.Namespace:
    """Fill `args` from the environment and the config file; check them. Raises ConfigError."""
    values = _config_file(args.config) if args.config else {}
    for key, variable in SETTINGS.items():
        if os.environ.get(variable):
            values[key] = os.environ[variable]
        if getattr(args, key):
            values[key] = getattr(args, key)
    missing = [key for key in REQUIRED if not values.get(key)]
    if missing:
        raise ConfigError("missing setting(s): %s (see --help)" % ", ".join(missing))
    if any(not isinstance(value, str) for value in values.values()):
        raise ConfigError("every setting must be a string")
    args.server_url = check_server_url(values["server_url"])
    for key in ("credential_file", "bootstrap_file", "state_dir", "ca_file"):
        setattr(args, key, os.path.abspath(values[key]) if values.get(key) else None)
    args.name = values.get("name") or "vm-" + socket.gethostname()
    return args


def _config_file(path: str) -> dict:
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


def credential(args: argparse.Namespace, ssl_context) -> str:
    """The credential from its file; in a VM's first start, from the bootstrap exchange. Raises ConfigError, Refused."""
    if args.bootstrap_file and not os.path.exists(args.credential_file):
        return _bootstrap(args, ssl_context)
    return read_credential(args.credential_file)


def _bootstrap(args: argparse.Namespace, ssl_context) -> str:
    """Exchange the one-time secret; the credential is stored (mode 600, fsynced) before the secret is deleted."""
    try:
        secret = read_credential(args.bootstrap_file)
    except ConfigError as exc:
        raise ConfigError("bootstrap: %s" % exc) from None
    answer = _post_until_answered(args.server_url, secret, ssl_context)
    value = answer.get("credential")
    if not isinstance(value, str) or not value or not value.isprintable() or " " in value:
        raise ConfigError("bootstrap: the server's answer holds no credential")
    directory = os.path.dirname(args.credential_file)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = "%s.tmp-%d" % (args.credential_file, os.getpid())
    write_synced(tmp, (value + "\n").encode(), 0o600)
    os.replace(tmp, args.credential_file)
    fsync_dir(directory)
    os.unlink(args.bootstrap_file)
    log("exchanged the bootstrap secret for the attempt credential, stored in %s" % args.credential_file)
    return value


def _post_until_answered(url: str, secret: str, ssl_context) -> dict:
    """POST the exchange; network errors and 5xx are retried with backoff (the VM's network may be late)."""
    parts = urllib.parse.urlsplit(url)
    given_up_at, delay = time.monotonic() + BOOTSTRAP_GIVE_UP, 0.5
    while True:
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=10, context=ssl_context)
        else:
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        try:
            connection.request(
                "POST",
                parts.path.rstrip("/") + BOOTSTRAP_PATH,
                body=b"{}",
                headers={"Authorization": "Bearer " + secret, "Content-Type": "application/json"},
            )
            response = connection.getresponse()
            status, raw = response.status, response.read()
            why = "HTTP %d: %s" % (status, raw[:300].decode("utf-8", "replace"))
        except (OSError, http.client.HTTPException) as exc:
            status, raw, why = 0, b"", "no answer: %s" % exc
        finally:
            connection.close()
        if status == 200:
            try:
                answer = json.loads(raw.decode("utf-8"))
            except ValueError:
                answer = None
            if isinstance(answer, dict):
                return answer
            raise ConfigError("bootstrap: the server's answer is not a JSON object")
        if status == 401:
            raise Refused("bootstrap: the server refused the bootstrap secret: %s" % why)
        if 300 <= status < 500 and status != 429:
            raise ConfigError("bootstrap: %s (give the final address as the server URL)" % why)
        if time.monotonic() > given_up_at:
            raise ConfigError("bootstrap: no usable answer for %d s: %s" % (BOOTSTRAP_GIVE_UP, why))
        log("bootstrap: %s; trying again in %.1f s" % (why, delay))
        time.sleep(delay)
        delay = min(delay * 2, 10.0)
