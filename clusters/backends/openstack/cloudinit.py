"""The user data of a task's server: cloud-init writes the host program (runner_api/agent_bundle.py, unless the
image carries it), its config and one-time bootstrap secret (root-only files) and a systemd unit that starts it.
The secret is issued by the task service (runner_api/bootstrap.py) and handed over in the AttemptRef; the VM
never sees the attempt credential. The program then speaks protocol v2 for its one attempt (docs/runner.md).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from cloudpivot import credentials
from clusters.backends.agent_bundle import agent_zipapp_gzip
from clusters.backends.base import BackendError

CONFIG_DIR = "/etc/cloudpivot"
AGENT_CONFIG = f"{CONFIG_DIR}/agent.json"
AGENT_BOOTSTRAP = f"{CONFIG_DIR}/bootstrap"
AGENT_CA = f"{CONFIG_DIR}/ca.pem"
AGENT_STATE = "/var/lib/cloudpivot"
AGENT_SERVICE = "cloudpivot-agent.service"
AGENT_UNIT = f"/etc/systemd/system/{AGENT_SERVICE}"
# How the VM gets the host program: in the user data (any image with python3, cloud-init and systemd), or
# already in the image at `runner_path` (the same version as the server's: docs/backends/openstack.md).
DELIVERY_MODES = ("user_data", "preinstalled")


def callback_url(options: dict[str, Any]) -> str:
    """How VMs reach CloudPivot: the connection's `callback_url`, else settings.RUNNER_SERVER_URL."""
    return (options["callback_url"] or settings.RUNNER_SERVER_URL).rstrip("/")


def user_data(options: dict[str, Any], bootstrap_secret: str) -> str:
    """The #cloud-config document for one attempt's server."""
    config: dict[str, str] = {
        "server_url": callback_url(options),
        "credential_file": f"{AGENT_STATE}/credential",
        "bootstrap_file": AGENT_BOOTSTRAP,
        "state_dir": f"{AGENT_STATE}/runs",
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
        files.append({"path": AGENT_CA, "owner": "root:root", "permissions": "0644", "content": ca})
        config["ca_file"] = AGENT_CA
    if options["runner_bootstrap"] == "user_data":
        program = base64.b64encode(agent_zipapp_gzip()).decode()
        files.append(
            {
                "path": options["runner_path"],
                "owner": "root:root",
                "permissions": "0755",
                "encoding": "gz+b64",
                "content": program,
            }
        )
    files += [
        {"path": AGENT_CONFIG, "owner": "root:root", "permissions": "0600", "content": json.dumps(config)},
        {"path": AGENT_BOOTSTRAP, "owner": "root:root", "permissions": "0600", "content": bootstrap_secret},
        {"path": AGENT_UNIT, "owner": "root:root", "permissions": "0644", "content": _unit(options)},
    ]
    document = {
        "write_files": files,
        "runcmd": [["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", AGENT_SERVICE]],
    }
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False, width=4096)


def _unit(options: dict[str, Any]) -> str:
    return (
        "[Unit]\nDescription=CloudPivot host agent\nWants=network-online.target\nAfter=network-online.target\n\n"
        "[Service]\nType=simple\n"
        f"ExecStart={options['runner_python']} {options['runner_path']} --config {AGENT_CONFIG}\n"
        # The programs run on under their supervisors when the agent restarts: it re-attaches to them.
        "KillMode=process\n"
        # 2 = bad configuration, 3 = credential refused, 75 = another agent holds the lock: retrying cannot help
        "Restart=on-failure\nRestartSec=5\nRestartPreventExitStatus=2 3 75\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
