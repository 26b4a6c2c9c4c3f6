"""The user data of a task VM carries the one host program and starts it (docs/backends/openstack.md): what
cloud-init is given, checked without a cloud; the dev-cloud tests then run it from what Nova hands back."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import subprocess
import sys

import yaml

from clusters.backends.agent_bundle import agent_zipapp
from clusters.backends.openstack import cloudinit
from clusters.backends.openstack.client import DEFAULT_OPTIONS

NOVA_USER_DATA_MAX = 65535  # bytes of base64, as Nova's API takes it


def document(**options) -> dict:
    text = cloudinit.user_data({**DEFAULT_OPTIONS, "callback_url": "https://cp.example.org", **options}, "cpb_x")
    assert text.startswith("#cloud-config\n")
    return yaml.safe_load(text) | {"_text": text}


def test_the_user_data_carries_the_host_program_its_config_and_a_unit_that_starts_it(tmp_path):
    data = document()
    files = {entry["path"]: entry for entry in data["write_files"]}
    program = files["/opt/cloudpivot/cloudpivot-agent.pyz"]
    assert program["permissions"] == "0755"
    assert program["encoding"] == "gz+b64"
    assert gzip.decompress(base64.b64decode(program["content"])) == agent_zipapp()
    assert json.loads(files["/etc/cloudpivot/agent.json"]["content"]) == {
        "server_url": "https://cp.example.org",
        "credential_file": "/var/lib/cloudpivot/credential",
        "bootstrap_file": "/etc/cloudpivot/bootstrap",
        "state_dir": "/var/lib/cloudpivot/runs",
    }
    assert files["/etc/cloudpivot/bootstrap"] == {
        "path": "/etc/cloudpivot/bootstrap",
        "owner": "root:root",
        "permissions": "0600",
        "content": "cpb_x",
    }
    unit = files["/etc/systemd/system/cloudpivot-agent.service"]["content"]
    assert "ExecStart=/usr/bin/python3 /opt/cloudpivot/cloudpivot-agent.pyz --config /etc/cloudpivot/agent.json" in unit
    assert "KillMode=process" in unit and "RestartPreventExitStatus=2 3 75" in unit
    assert data["runcmd"][-1] == ["systemctl", "enable", "--now", "cloudpivot-agent.service"]
    assert len(base64.b64encode(data["_text"].encode())) < NOVA_USER_DATA_MAX * 0.75  # room for a CA and more


def test_the_program_in_the_user_data_runs_alone_with_the_standard_library(tmp_path):
    """Written as cloud-init writes it, run by a Python that sees nothing of this project (-I, another cwd)."""
    path = tmp_path / "cloudpivot-agent.pyz"
    path.write_bytes(agent_zipapp())
    version = subprocess.run([sys.executable, "-I", str(path), "--version"], cwd=tmp_path, capture_output=True)
    assert version.returncode == 0 and version.stdout.decode().startswith("cloudpivot-agent 2."), version
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"server_url": "http://example.org", "credential_file": "c", "state_dir": "s"}))
    refused = subprocess.run([sys.executable, "-I", str(path), "--config", str(config)], capture_output=True)
    assert refused.returncode == 2  # a configuration error, which the unit does not restart
    assert "plain http:// is accepted only for loopback hosts" in refused.stderr.decode()


def test_the_bundle_is_the_same_bytes_for_the_same_sources():
    agent_zipapp.cache_clear()
    first = hashlib.sha256(agent_zipapp()).hexdigest()
    agent_zipapp.cache_clear()
    assert hashlib.sha256(agent_zipapp()).hexdigest() == first


def test_an_image_that_carries_the_program_gets_no_copy_and_an_unknown_mode_is_said_in_words():
    files = {entry["path"] for entry in document(runner_bootstrap="preinstalled")["write_files"]}
    assert "/opt/cloudpivot/cloudpivot-agent.pyz" not in files and "/etc/cloudpivot/agent.json" in files
    from clusters.backends.openstack.checks import delivery_note

    assert "use 'user_data' (the default) or 'preinstalled'" in delivery_note("fetch", "/x")
