"""`manage.py host_agent`: the credential and command line for running the host agent as a service."""

from __future__ import annotations

import stat
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cloudpivot import credentials
from clusters.backends.local import agent_name


def test_it_writes_a_private_credential_the_server_accepts_and_prints_the_command(world):
    out = StringIO()
    call_command("host_agent", stdout=out)
    credential_file = world.runs_dir / "agent.credential"
    assert stat.S_IMODE(credential_file.stat().st_mode) == 0o600
    name = agent_name(world.runs_dir)
    assert credentials.agent_credential_matches(name=name, presented=credential_file.read_text())
    line = out.getvalue()
    assert "cloudpivot_agent.py" in line and f"--name {name}" in line and f"--state-dir {world.runs_dir}" in line


def test_it_names_a_cloud_that_is_not_local(world):
    with pytest.raises(CommandError, match="no local connection with cloud id 'elsewhere'"):
        call_command("host_agent", cloud="elsewhere")


def test_the_command_line_carries_the_run_as_account(world):
    world.local.options |= {"run_as": "cloudpivot-tasks"}
    world.local.save()
    out = StringIO()
    call_command("host_agent", stdout=out)
    assert out.getvalue().startswith("CLOUDPIVOT_RUN_AS=cloudpivot-tasks ")


def test_the_agent_reports_to_the_agents_url_when_there_is_one(world, settings):
    """The agents' own web process (deploy/systemd/cloudpivot-agents-web.service); without one, the Runners' URL."""
    settings.RUNNER_SERVER_URL = "https://cloudpivot.example.org"
    settings.AGENT_SERVER_URL = ""
    out = StringIO()
    call_command("host_agent", stdout=out)
    assert "--server-url https://cloudpivot.example.org " in out.getvalue()
    settings.AGENT_SERVER_URL = "http://127.0.0.1:8001"
    out = StringIO()
    call_command("host_agent", stdout=out)
    assert "--server-url http://127.0.0.1:8001 " in out.getvalue()
