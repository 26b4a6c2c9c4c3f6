"""A server Nova never finishes building ends its task FAILED at the boot deadline ("never booted"), not UNKNOWN.

A build that hangs (an RPC lost between nova-api, nova-conductor and nova-compute) cannot be made on demand in
the shared development cloud, so the observation is built from the SDK's own Server resource, as Nova lists it.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from openstack.compute.v2.server import Server

from clusters.backends.base import AttemptRef
from clusters.backends.openstack import runner_never_reported
from clusters.backends.openstack.observation import server_observation

NOW = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)
ATTEMPT = AttemptRef(
    task_id="t", attempt_id=1, number=1, external_name="cp-t-1", external_ref="srv-1", spec={}, runner_credential=""
)
BACKEND = SimpleNamespace(options={"boot_deadline_seconds": 300})


def building(seconds_ago: float) -> Server:
    created = (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Server(id="srv-1", name="cp-t-1", status="BUILD", created_at=created, task_state="scheduling")


def observe(server: Server):
    return server_observation(ATTEMPT, [server], NOW, boot_deadline_seconds=300, fault_of=dict)


def test_a_server_still_building_within_the_deadline_is_waited_for():
    observation = observe(building(200))
    assert observation.phase == "pending"
    assert runner_never_reported(BACKEND, ATTEMPT, observation, runner_contact_at=None) is None


def test_a_server_still_building_past_the_deadline_never_booted():
    verdict = runner_never_reported(BACKEND, ATTEMPT, observe(building(301)), runner_contact_at=None)
    assert verdict is not None
    assert verdict["reason"].startswith("the server never booted: cp-t-1 was still being built (BUILD) 300 s")
    assert verdict["console_tail"] == ""  # nothing booted; Nova is not asked for a console


def test_a_runner_that_called_is_never_judged_by_the_build_deadline():
    observation = observe(building(3600))
    assert runner_never_reported(BACKEND, ATTEMPT, observation, runner_contact_at=NOW) is None
