"""`network: none` on the `local` cloud (docs/security.md#egress): the host program runs the program in a network
namespace of its own (runner_api/agent/cloudpivot_supervisor.py, close_network), with its own loopback up; a program
that tries a TCP port the test opens on the host's 127.0.0.1 fails with it and succeeds without it. Where the
namespace cannot be made (the agent is not root), the program is not run at all: exit 126 with the reason."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap

import pytest

from tasks.models import Task
from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec

AGENT_DIR = helpers.BASE_DIR / "runner_api" / "agent"
PROGRAM = """
import socket, sys
own = socket.socket()
own.bind(("127.0.0.1", 0))
own.listen(1)
socket.create_connection(own.getsockname(), timeout=5).close()
print("loopback ok", flush=True)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
except OSError as exc:
    print("refused:", type(exc).__name__, flush=True)
    sys.exit(3)
print("connected", flush=True)
"""


def _namespaces_allowed() -> bool:
    done = subprocess.run(["unshare", "-n", "true"], capture_output=True) if shutil.which("unshare") else None
    return done is not None and done.returncode == 0


@pytest.fixture
def host_port():
    """A TCP port listening on the host's 127.0.0.1 (connections wait in its backlog: nobody accepts)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def _run(world, port: int, **extra) -> Task:
    document = hello_spec(command=["python3", "-c", PROGRAM.format(port=port)], **extra)
    task, _ = task_submit(user=world.bob, document=document)
    return helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=40)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not _namespaces_allowed(), reason="this host may not make network namespaces (not root)")
def test_without_network_the_program_cannot_reach_the_hosts_port_and_with_it_can(live, world, host_port):
    closed = _run(world, host_port, network="none")
    assert closed.normalized["egress"] == "none"
    assert closed.state == "FAILED" and closed.exit_code == 3, closed.state_reason
    assert log_read(task=closed)["data"] == "loopback ok\nrefused: ConnectionRefusedError\n"

    opened = _run(world, host_port)
    assert opened.normalized["egress"] == "open"
    assert opened.state == "SUCCEEDED", opened.state_reason
    assert log_read(task=opened)["data"] == "loopback ok\nconnected\n"


CHILD = """
import os, sys
sys.path.insert(0, {agent!r})
import cloudpivot_supervisor as supervisor
directory = sys.argv[1]
if os.geteuid() == 0:  # as an account that may not make a network namespace
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    argv = ["python3", "-c", "print('ran')"]
    spec = {{"argv": argv, "env": dict(os.environ), "workdir": directory, "network": "none"}}
    supervisor.exec_program(directory, spec, write)
os.close(write)
message = os.read(read, 4096).decode()
_, status = os.waitpid(pid, 0)
print(os.WEXITSTATUS(status))
print(message)
"""


def test_where_the_network_cannot_be_closed_the_program_does_not_run(tmp_path):
    directory = tempfile.mkdtemp(prefix="cp-egress-")
    try:
        os.chmod(directory, 0o777)
        child = textwrap.dedent(CHILD.format(agent=str(AGENT_DIR)))
        done = subprocess.run([sys.executable, "-c", child, directory], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        code, message = done.stdout.split("\n", 1)
        assert code == "126"
        assert message.strip() == (
            "cannot run the program without network (network: none): unshare(CLONE_NEWNET) failed: "
            "Operation not permitted (the host agent must run as root to close a task's network)"
        )
        with open(os.path.join(directory, "stdout")) as out:
            assert out.read() == ""  # never ran
    finally:
        shutil.rmtree(directory, ignore_errors=True)
