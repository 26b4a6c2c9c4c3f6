"""What each backend reads from `CloudConnection.options`: every key with its type, so a typo or a wrong type
is refused when the connection is saved (a misspelled `flavour` would otherwise be ignored for ever).

The backends keep their defaults (DEFAULT_OPTIONS in their packages); this table only says which keys exist
and what shape each value has. docs/backends/*.md describe what they mean.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from clusters.choices import BackendKind
from clusters.egress import policy_problem

TEXT, NUMBER, WHOLE, FLAG, NAMES, MAPPING, NAMES_OR_WORD = "text", "number", "whole", "flag", "names", "map", "nets"
SHAPES = {
    TEXT: "a string",
    NUMBER: "a number",
    WHOLE: "a whole number (0 or more)",
    FLAG: "true or false",
    NAMES: "a list of strings",
    MAPPING: "an object",
    NAMES_OR_WORD: '"none", "auto", or a list of network names or ids',
}
KNOWN: dict[str, dict[str, str]] = {
    BackendKind.OPENSTACK: {
        "cloud": TEXT,
        "region": TEXT,
        "flavor": TEXT,
        "image": TEXT,
        "networks": NAMES_OR_WORD,
        "key_name": TEXT,
        "security_groups": NAMES,
        "availability_zone": TEXT,
        "runner_bootstrap": TEXT,
        "runner_path": TEXT,
        "runner_python": TEXT,
        "callback_url": TEXT,
        "ca_file": TEXT,
        "retention": TEXT,
        "boot_deadline_seconds": WHOLE,
        "api_timeout_seconds": NUMBER,
        "root_disk": TEXT,  # instances: "ephemeral" or "volume"; checked below
        "results_container": TEXT,  # the Swift container of task outputs ("": none; docs/data.md)
        # how users reach instances by SSH (docs/resources.md#ssh-access)
        "ssh_user": TEXT,
        "ssh_jump_host": TEXT,
        "ssh_port": WHOLE,
        # how long a failed attempt's server may be kept for debugging (clusters/debug_hold.py)
        "debug_hold_max_minutes": WHOLE,
        # what a task may reach outside (clusters/egress.py): {"default": "none"|"open", "allow": [destinations]}
        "egress": MAPPING,
    },
    BackendKind.KUBERNETES: {
        "context": TEXT,
        "ca_file": TEXT,
        "insecure_skip_tls_verify": FLAG,
        "service_account": TEXT,
        "image_pull_secrets": NAMES,
        "node_selector": MAPPING,
        "tolerations": NAMES_OR_WORD,  # a list of objects; checked as a list below
        "default_resources": MAPPING,
        "allowed_node_selectors": MAPPING,
        "allowed_tolerations": NAMES_OR_WORD,
        "ttl_seconds_after_finished": WHOLE,
        "keep_finished_jobs": FLAG,
        "image_pull_grace_seconds": NUMBER,
        "request_timeout_seconds": NUMBER,
        "log_interval_seconds": NUMBER,
        "log_limit_bytes": WHOLE,
        # KubeVirt instances on the same connection (docs/backends/kubevirt.md)
        "vm_flavors": MAPPING,
        "vm_images": MAPPING,
        "vm_root_disk": TEXT,  # "containerdisk" or an object; checked below
        "ssh_user": TEXT,
        "ssh_jump_host": TEXT,
        "ssh_port": WHOLE,
        # how long a failed attempt's pod may be kept for debugging (clusters/debug_hold.py)
        "debug_hold_max_minutes": WHOLE,
        "egress": MAPPING,
    },
    # data_roots: the host directories (absolute) a task's `dir` references may lie in (clusters/data_refs.py)
    BackendKind.LOCAL: {"run_as": TEXT, "runs_dir": TEXT, "egress": MAPPING, "data_roots": NAMES},
}
LISTS_OF_OBJECTS = {"tolerations", "allowed_tolerations"}
RETENTION = ("delete", "keep")
ROOT_DISK = ("ephemeral", "volume")  # OpenStack instances: boot from the image, or from a Cinder volume made from it
SSH_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
JUMP_HOST = re.compile(  # [user@]host[:port]; never starting with '-', so it cannot become an ssh option
    r"^(?:[a-z_][a-z0-9_.-]{0,31}@)?(?:[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$"
)


def option_errors(backend: str, options: Any) -> list[tuple[str, str]]:
    """[(key, words)] for every unknown key and wrong value; empty when the options are fine."""
    if not isinstance(options, dict):
        return [("", "must be a JSON object of option names and values")]
    known = KNOWN.get(backend, {})
    errors = []
    for key, value in options.items():
        if key not in known:
            errors.append((key, unknown_words(backend, key)))
            continue
        problem = _shape_problem(key, known[key], value)
        if problem:
            errors.append((key, problem))
    return errors


def unknown_words(backend: str, key: str) -> str:
    known = sorted(KNOWN.get(backend, {}))
    guess = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean '{guess[0]}'?)" if guess else ""
    return f"unknown option '{key}' for {backend} connections{hint}; known options: {', '.join(known)}"


def _shape_problem(key: str, shape: str, value: Any) -> str:
    if key in LISTS_OF_OBJECTS:
        ok = isinstance(value, list) and all(isinstance(item, dict) for item in value)
        return "" if ok else f"'{key}' must be a list of objects"
    if key == "vm_root_disk":
        ok = value == "containerdisk" or isinstance(value, dict)
        return "" if ok else '\'vm_root_disk\' must be "containerdisk" or an object like {"size_gb": 10}'
    if key == "root_disk" and value not in ROOT_DISK:
        return f"'root_disk' must be one of {', '.join(ROOT_DISK)}, not {value!r}"
    if key == "ssh_user" and not (isinstance(value, str) and SSH_USER.match(value)):
        return "'ssh_user' must be a Linux user name (lower-case letters, digits, '_' and '-'; at most 32)"
    if key == "ssh_jump_host" and not (isinstance(value, str) and JUMP_HOST.match(value)):
        return "'ssh_jump_host' must be [user@]host[:port], as `ssh -J` takes it"
    if key == "ssh_port" and not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535):
        return f"'ssh_port' must be a TCP port (1 to 65535), not {value!r}"
    if key == "egress":
        return policy_problem(value)
    if key == "data_roots" and isinstance(value, list):
        bad = [
            item
            for item in value
            if not (isinstance(item, str) and item.startswith("/") and ".." not in item.split("/"))
        ]
        if bad:
            return f"'data_roots' must be a list of absolute directories (no '..'), not {bad[0]!r}"
    if key == "retention" and value not in RETENTION:
        return f"'retention' must be one of {', '.join(RETENTION)}, not {value!r}"
    ok = {
        TEXT: isinstance(value, str),
        NUMBER: isinstance(value, int | float) and not isinstance(value, bool) and value >= 0,
        WHOLE: isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        FLAG: isinstance(value, bool),
        NAMES: isinstance(value, list) and all(isinstance(item, str) for item in value),
        MAPPING: isinstance(value, dict),
        NAMES_OR_WORD: isinstance(value, str)
        or (isinstance(value, list) and all(isinstance(item, str) for item in value)),
    }[shape]
    return "" if ok else f"'{key}' must be {SHAPES[shape]}, not {type(value).__name__} {value!r}"
