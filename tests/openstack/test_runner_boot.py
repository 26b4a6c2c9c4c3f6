"""A task's VM boots before its Runner calls: STARTING with the reason until the boot deadline, never UNKNOWN."""

from __future__ import annotations

import time

import pytest

from tasks.services import reconcile_pass
from tasks.services.submission import task_submit
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_an_active_server_whose_runner_has_not_called_yet_stays_starting_until_the_boot_deadline(os_live, settings):
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 1  # a heartbeat deadline far shorter than the boot deadline
    task, _ = task_submit(user=os_live.world.bob, document={"cloud": "os-dev", "command": ["true"]})
    task = helpers.drive(task, {"STARTING"}, timeout=60)
    server_id = task.attempts.get().external_ref
    helpers.wait_for(
        lambda: os_live.conn.compute.get_server(server_id).status == "ACTIVE", timeout=60, what="the server ACTIVE"
    )
    until = time.monotonic() + 4  # four heartbeat deadlines of silence
    while time.monotonic() < until:
        reconcile_pass()
        time.sleep(0.3)
    task.refresh_from_db()
    assert task.state == "STARTING", task.state_reason
    assert task.attempts.get().booted_at is not None  # server ACTIVE: the attempt's "booted" phase
    assert task.state_reason == "waiting for the Runner (booting; up to 300 s)"
    waits = task.events.filter(type="observed", message__startswith="waiting for the Runner")
    assert waits.count() == 1  # said once, not every pass
