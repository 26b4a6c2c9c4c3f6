"""The VM Runner (a real process, as on an OpenStack server) receives the task's project secrets in its
assignment: as a variable and as a 0600 file it writes before the program starts; the log keeps them masked."""

from __future__ import annotations

import pytest

from cloudpivot.accounts.project_secrets import secret_create
from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec
from tests.runner_api.support import with_vm_host

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
VALUE = "runner-S3cret-value"


@pytest.fixture
def world(world, tmp_path, monkeypatch):
    return with_vm_host(world, tmp_path, monkeypatch)


def test_the_runner_delivers_secrets_as_env_and_a_private_file(server, world, tmp_path):
    secret_create(user=world.alice, project=world.alpha, name="api-token", value=VALUE)
    path = tmp_path / "vm" / "token"
    program = (
        "import os\n"
        f"print(os.environ['API_TOKEN'] == open({str(path)!r}).read(), os.environ['API_TOKEN'], flush=True)\n"
        f"print(oct(os.stat({str(path)!r}).st_mode & 0o777))\n"
    )
    refs = [{"name": "api-token", "env": "API_TOKEN"}, {"name": "api-token", "file": str(path)}]
    document = hello_spec(command=["python3", "-c", program], secrets=refs) | {"cloud": "vm-host"}
    task, _ = task_submit(user=world.bob, document=document)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=40)
    assert task.state == "SUCCEEDED", task.state_reason
    assert log_read(task=task)["data"] == "True ***\n0o600\n"
