"""`manage.py host_agent`: what a service manager needs to run a `local` connection's host agent itself."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from clusters.backends.local import (
    AGENT_PROGRAM,
    LocalBackend,
    agent_credential_file_write,
    agent_name,
    agent_server_url,
    connection_run_as,
)
from clusters.models import CloudConnection


class Command(BaseCommand):
    help = "Write the host agent's credential file and print the command line that runs the agent."

    def add_arguments(self, parser):
        parser.add_argument("--cloud", default="local", help="the `local` connection's cloud id (default: local)")

    def handle(self, *args, cloud: str, **options):
        connection = CloudConnection.objects.filter(cloud_id=cloud, backend="local").first()
        if connection is None:
            raise CommandError(f"no local connection with cloud id {cloud!r}")
        runs_dir = LocalBackend(connection).runs_dir
        credential_file = agent_credential_file_write(runs_dir)
        # The supervisor reads the account to run programs as from the agent's environment (docs/security.md).
        run_as = connection_run_as(connection)
        environment = f"CLOUDPIVOT_RUN_AS={run_as} " if run_as else ""
        self.stdout.write(
            f"{environment}{sys.executable} {AGENT_PROGRAM} --server-url {agent_server_url()} "
            f"--state-dir {runs_dir} "
            f"--credential-file {credential_file} --name {agent_name(runs_dir)}\n"
        )
