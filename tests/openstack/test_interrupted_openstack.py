"""A task's server whose compute host Nova reports DOWN was interrupted, not failed (issue 30, item 1): the
attempt ends `interrupted` and the task runs again without using up a retry.

The development OpenStack's one compute service is forced down through Nova's own API (as an operator marks
a dead host), so the server lists `host_status: DOWN`; the VM stand-in dies with its host. The service is
brought back before the next attempt boots, and whatever happens, at the end.
"""

from __future__ import annotations

import os
import signal

import pytest

from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def compute_host(os_live):
    conn = os_live.conn
    (service,) = list(conn.compute.services(binary="nova-compute"))

    def force(down: bool) -> None:
        conn.compute.update_service_forced_down(service, service.host, "nova-compute", forced=down)

    yield force
    force(False)


def server_active(conn, server_id: str) -> bool:
    return conn.compute.get_server(server_id).status == "ACTIVE"


def test_a_server_whose_host_goes_down_interrupts_the_attempt_and_the_task_runs_again(
    os_live, vms, compute_host, tmp_path
):
    marker = tmp_path / "first-run"
    program = f"import os, time; first = not os.path.exists({str(marker)!r}); open({str(marker)!r}, 'a').close()\n"
    program += "time.sleep(600 if first else 0); print('second run')"
    task, _ = task_submit(user=os_live.world.bob, document={"cloud": "os-dev", "command": ["python3", "-c", program]})
    task = helpers.drive(task, {"STARTING"}, timeout=60)
    first_server = task.attempts.get().external_ref
    helpers.wait_for(lambda: server_active(os_live.conn, first_server), timeout=60, what="the first server ACTIVE")
    vm = vms(os_live.conn, first_server)
    task = helpers.drive(task, {"RUNNING"}, timeout=60)
    helpers.wait_for(marker.exists, what="the first run")

    compute_host(True)  # the host dies, and its VM with it
    os.killpg(vm.process.pid, signal.SIGKILL)
    task = helpers.drive(task, {"RETRY_WAIT", "SUBMITTING", "STARTING", "FAILED", "UNKNOWN"}, timeout=60)
    first = task.attempts.order_by("number").first()
    assert first.state == "interrupted", (task.state, task.state_reason)
    assert "compute host is down" in first.failure_reason
    assert (task.failed_attempts, task.interruptions) == (0, 1)

    compute_host(False)  # the operator brings the host back; the next attempt boots there
    task = helpers.drive(task, {"STARTING"}, timeout=60)
    second_server = task.attempts.order_by("number").last().external_ref
    assert second_server != first_server
    helpers.wait_for(lambda: server_active(os_live.conn, second_server), timeout=60, what="the second server ACTIVE")
    vms(os_live.conn, second_server)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=60)
    assert task.state == "SUCCEEDED", task.state_reason
    assert task.attempts_count == 2 and task.failed_attempts == 0
    assert log_read(task=task)["data"] == "second run\n"
