"""The user data of a task's server: cloud-init writes the Runner's config and one-time bootstrap secret
(root-only files) and a systemd unit that starts the Runner. The secret is issued by the task service
(runner_api/bootstrap.py) and handed over in the AttemptRef; the VM never sees the attempt credential.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from cloudpivot import credentials
from clusters.backends.base import BackendError

RUNNER_DIR = "/etc/cloudpivot"
RUNNER_CONFIG = f"{RUNNER_DIR}/runner.json"
RUNNER_BOOTSTRAP = f"{RUNNER_DIR}/bootstrap"
RUNNER_CA = f"{RUNNER_DIR}/ca.pem"
RUNNER_STATE = "/var/lib/cloudpivot"
RUNNER_UNIT = "/etc/systemd/system/cloudpivot-runner.service"


def callback_url(options: dict[str, Any]) -> str:
    """How VMs reach CloudPivot: the connection's `callback_url`, else settings.RUNNER_SERVER_URL."""
    return (options["callback_url"] or settings.RUNNER_SERVER_URL).rstrip("/")


def user_data(options: dict[str, Any], bootstrap_secret: str) -> str:
    """The #cloud-config document for one attempt's server."""
    config: dict[str, str] = {
        "server_url": callback_url(options),
        "credential_file": f"{RUNNER_STATE}/credential",
        "bootstrap_file": RUNNER_BOOTSTRAP,
        "state_dir": f"{RUNNER_STATE}/state",
    }
    files: list[dict[str, str]] = []
    if options["ca_file"]:
        try:
            ca_file = credentials.allowed_file(options["ca_file"], field="options.ca_file")
        except credentials.CredentialsNotAllowed as exc:
            raise BackendError(f"options.ca_file: {exc.message}", kind="auth") from None
        try:
            ca = Path(ca_file).read_text()
        except OSError as exc:
            raise BackendError(f"cannot read the CA file {options['ca_file']}: {exc}", kind="auth") from None
        files.append({"path": RUNNER_CA, "owner": "root:root", "permissions": "0644", "content": ca})
        config["ca_file"] = RUNNER_CA
    files += [
        {"path": RUNNER_CONFIG, "owner": "root:root", "permissions": "0600", "content": json.dumps(config)},
        {"path": RUNNER_BOOTSTRAP, "owner": "root:root", "permissions": "0600", "content": bootstrap_secret},
        {"path": RUNNER_UNIT, "owner": "root:root", "permissions": "0644", "content": _unit(options)},
    ]
    document = {
        "write_files": files,
        "runcmd": [
            ["systemctl", "daemon-reload"],
            ["systemctl", "enable", "--now", "cloudpivot-runner.service"],
        ],
    }
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False, width=4096)


def _unit(options: dict[str, Any]) -> str:
    return (
        "[Unit]\nDescription=CloudPivot Runner\nWants=network-online.target\nAfter=network-online.target\n\n"
        "[Service]\nType=simple\n"
        f"ExecStart={options['runner_python']} {options['runner_path']} --config {RUNNER_CONFIG}\n"
        # 2 = bad configuration, 3 = credential refused, 75 = another Runner holds the lock: retrying cannot help
        "Restart=on-failure\nRestartSec=5\nRestartPreventExitStatus=2 3 75\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
