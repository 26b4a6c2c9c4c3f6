"""`local` tasks run as the connection's `run_as` account when CloudPivot runs as root (docs/security.md).

A real user is made for the test; a real host agent (started by the backend) reports to a real Daphne.
The program proves what it is: another uid, its own working directory and result file writable, and the
server's secret key out of reach.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import uuid

import pytest
from django.conf import settings

from tasks.models import Task
from tests import helpers
from tests.builders import hello_spec

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root"),
]

PROGRAM = """
import json, os
print("uid", os.getuid(), "home", os.environ["HOME"] == os.getcwd())
with open("made-here.txt", "w") as out:  # the working directory is the program's own
    out.write("written")
with open(os.environ["CLOUDPIVOT_RESULT_FILE"], "w") as out:
    json.dump({"uid": os.getuid()}, out)
try:
    open(SECRET).read()
    print("read the secret key")
except PermissionError:
    print("secret key: permission denied")
"""


@pytest.fixture
def account():
    """A throwaway unprivileged user, removed afterwards."""
    name = f"cp-{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    yield pwd.getpwnam(name)
    subprocess.run(["userdel", name], check=False)


def test_a_local_task_runs_as_the_run_as_account_and_cannot_read_the_servers_secrets(live, world, account):
    world.local.options |= {"run_as": account.pw_name}
    world.local.save()
    secret = str(settings.VAR_DIR / "secret_key")
    command = ["python3", "-c", PROGRAM.replace("SECRET", repr(secret))]
    created = helpers.api_call(live.url, "POST", "/api/v1/tasks", world.tokens["bob"], hello_spec(command=command))
    task = helpers.drive(Task.objects.get(pk=created["id"]), until={"SUCCEEDED", "FAILED", "UNKNOWN"})

    path = f"/api/v1/tasks/{task.pk}"
    log = helpers.api_call(live.url, "GET", f"{path}/logs", world.tokens["bob"])["data"]
    assert task.state == "SUCCEEDED", (task.state_reason, log)
    assert log == f"uid {account.pw_uid} home True\nsecret key: permission denied\n"
    assert helpers.api_call(live.url, "GET", path, world.tokens["bob"])["result"]["summary"] == {"uid": account.pw_uid}
    # The agent's own files stay root's and private.
    assert (world.runs_dir / "agent.credential").stat().st_mode & 0o077 == 0


def test_a_run_as_account_that_does_not_exist_fails_the_task_in_words(live, world):
    world.local.options |= {"run_as": "no-such-user-cp"}
    world.local.save()
    created = helpers.api_call(live.url, "POST", "/api/v1/tasks", world.tokens["bob"], hello_spec())
    task = helpers.drive(Task.objects.get(pk=created["id"]), until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "FAILED"
    assert "cannot run the program as no-such-user-cp: there is no such user on this host" in task.state_reason
    assert json.dumps(task.state_reason)  # words, not a traceback
