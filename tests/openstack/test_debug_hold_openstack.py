"""Debug hold on the development OpenStack: the failed (or timed-out) attempt's server stays ACTIVE through
reconcile passes, the API says how to reach its console, and the server is deleted on release or when the hold
ends. The VM's Runner is the real Runner (tests/plugins/openstack.py plays cloud-init)."""

from __future__ import annotations

import datetime as dt

import pytest

from cloudpivot.accounts.models import AuditEntry
from clusters.backends.openstack import installation_tag
from tasks.models import Task
from tasks.selectors import task_quota_usage
from tasks.services import reconcile_pass
from tasks.services.reconcile import cleanups_pending
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def held_os(os_live):
    connection = os_live.connection
    connection.options = connection.options | {"debug_hold_max_minutes": 60}
    connection.save()
    return os_live


def servers_named(os_live, name: str) -> list:
    return [s for s in os_live.conn.compute.servers(name=f"^{name}$", tags=installation_tag()) if s.name == name]


def run_in_vm(held_os, api, vms, **spec) -> tuple[Task, str]:
    document = {"cloud": "os-dev", "debug_hold_minutes": 30, **spec}
    response = api("bob").post("/api/v1/tasks", document, format="json")
    assert response.status_code == 201, response.json()
    task = helpers.drive(Task.objects.get(pk=response.json()["id"]), {"STARTING"}, timeout=60)
    server_id = task.attempts.get().external_ref

    def active():
        server = held_os.conn.compute.get_server(server_id)
        return server.status == "ACTIVE" and not server.task_state

    helpers.wait_for(active, timeout=60, interval=0.3, what="the server ACTIVE")
    vms(held_os.conn, server_id)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "TIMED_OUT", "UNKNOWN"}, timeout=60)
    return task, server_id


def hold_of(api, task: Task) -> dict:
    return api("bob").get(f"/api/v1/tasks/{task.pk}/attempts").json()["attempts"][0]["debug_hold"]


def test_a_failed_vm_is_kept_with_its_console_line_until_released(held_os, api, vms):
    task, server_id = run_in_vm(held_os, api, vms, command=["python3", "-c", "import sys; sys.exit(3)"])
    assert task.state == "FAILED" and task.exit_code == 3, task.state_reason
    name = task.attempts.get().external_name
    for _ in range(3):
        reconcile_pass()
    server = held_os.conn.compute.get_server(server_id)
    assert server.status == "ACTIVE"
    hold = hold_of(api, task)
    assert hold["active"] is True
    assert hold["how_to_get_in"]["kind"] == "openstack_console"
    assert hold["how_to_get_in"]["command"] == f"openstack console url show {server_id}"
    assert task_quota_usage(project_id=held_os.world.alpha.pk, connection_id=held_os.connection.pk).tasks == 1

    response = api("bob").post(f"/api/v1/tasks/{task.pk}/release-hold")
    assert response.status_code == 200, response.json()
    helpers.wait_for(
        lambda: reconcile_pass() is not None and not servers_named(held_os, name), timeout=60, what="server deleted"
    )
    helpers.wait_for(  # cleanup is done once a pass finds no server left; until then the hold still counts
        lambda: reconcile_pass() is not None and task.attempts.get().cleanup_state == "done", what="cleanup done"
    )
    assert AuditEntry.objects.filter(action="tasks:debug-hold-released", actor=held_os.world.bob).exists()
    assert task_quota_usage(project_id=held_os.world.alpha.pk, connection_id=held_os.connection.pk).tasks == 0


def test_a_timed_out_vm_is_held_too_and_deleted_when_the_hold_ends(held_os, api, vms):
    task, server_id = run_in_vm(held_os, api, vms, command=["sleep", "600"], timeout_seconds=2)
    assert task.state == "TIMED_OUT", task.state_reason
    attempt = task.attempts.get()
    assert attempt.hold_until is not None
    reconcile_pass()
    assert held_os.conn.compute.get_server(server_id).status == "ACTIVE"
    assert cleanups_pending(now=attempt.hold_until - dt.timedelta(seconds=1)) == 0  # not before the hold ends
    assert held_os.conn.compute.get_server(server_id).status == "ACTIVE"
    helpers.wait_for(  # the server can be gone before a pass finds it gone and calls the cleanup done
        lambda: (
            cleanups_pending(now=attempt.hold_until + dt.timedelta(seconds=1)) is not None
            and not servers_named(held_os, attempt.external_name)
            and task.attempts.get().cleanup_state == "done"
        ),
        timeout=60,
        what="the server deleted after the hold and the cleanup done",
    )
    assert AuditEntry.objects.filter(action="tasks:debug-hold-expired", object_ref=attempt.external_name).exists()
