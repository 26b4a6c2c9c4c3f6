"""The OpenStack backend against the real development OpenStack (deploy/dev/openstack/up.sh).

Collected only by `make bench`. Two figures:

1. Start latency over 20 tasks, one after the other: submit → server ACTIVE (Nova with the fake driver),
   and submit → the Runner's first contact (the VM is played as in tests/openstack: the real Runner, configured
   from the user data Nova returns, started as soon as the server is ACTIVE). p50 / p95.
2. One reconcile pass over N active tasks (N = 10, 100; real servers): wall time and OpenStack API requests,
   counted from keystoneauth's request log (every HTTP request the SDK sends). It asserts the scaling claim,
   not times: observation costs the same number of API calls whatever N is.
"""

from __future__ import annotations

import logging
import statistics
import time

import pytest
from django.utils import timezone

from tasks.models import Task
from tasks.services import reconcile_pass
from tasks.services.submission import task_submit
from tests import helpers

pytestmark = [pytest.mark.django_db(transaction=True)]
rows: list[str] = []


class RequestCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("REQ:"):
            self.count += 1


@pytest.fixture
def counter():
    handler = RequestCounter()
    loggers = [logging.getLogger(name) for name in ("keystoneauth", "keystoneauth1")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    yield handler
    for lg, level in zip(loggers, levels, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)


@pytest.fixture(scope="module", autouse=True)
def print_table():
    yield
    print("\n\nOpenStack backend (real Keystone/Nova/Glance/Neutron, fake virt driver)")
    for row in rows:
        print("  " + row)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def one_start(os_live, vms) -> tuple[float, float]:
    t0 = time.monotonic()
    task, _ = task_submit(user=os_live.world.bob, document={"cloud": "os-dev", "command": ["true"]})
    reconcile_pass()  # admission; the start job runs inline (jobs are synchronous here)
    attempt = task.attempts.get()

    def active():
        attempt.refresh_from_db()
        if not attempt.external_ref:
            reconcile_pass()
            return None
        server = os_live.conn.compute.get_server(attempt.external_ref)
        return server if server.status == "ACTIVE" else None

    server = helpers.wait_for(active, timeout=60, interval=0.05, what="ACTIVE")
    to_active = time.monotonic() - t0
    vms(os_live.conn, server.id)

    def contacted():
        attempt.refresh_from_db()
        return attempt.runner_contact_at

    helpers.wait_for(contacted, timeout=60, interval=0.05, what="the Runner's first contact")
    to_runner = time.monotonic() - t0

    def succeeded():
        reconcile_pass()
        return Task.objects.get(pk=task.pk).state == "SUCCEEDED"

    helpers.wait_for(succeeded, timeout=60, what="SUCCEEDED")
    return to_active, to_runner


def test_start_latency_over_20_tasks(os_live, vms):
    figures = [one_start(os_live, vms) for _ in range(20)]
    to_active, to_runner = [f[0] for f in figures], [f[1] for f in figures]
    for label, values in (("submit → server ACTIVE", to_active), ("submit → Runner's first contact", to_runner)):
        rows.append(
            f"{label:34s} p50 {statistics.median(values):6.2f} s   p95 {percentile(values, 95):6.2f} s   (20 tasks)"
        )


@pytest.mark.parametrize("n", [10, 100])
def test_one_reconcile_pass_costs_the_same_api_calls_for_any_number_of_tasks(os_live, counter, settings, n):
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 3600  # the servers have no Runner: keep them STARTING
    t0 = time.monotonic()
    tasks = [
        task_submit(user=os_live.world.bob, document={"cloud": "os-dev", "command": ["true"]})[0] for _ in range(n)
    ]
    while Task.objects.filter(pk__in=[t.pk for t in tasks], state="STARTING").count() < n:
        reconcile_pass()
        assert time.monotonic() - t0 < 30 * n, "the servers were not all created in time"
    created = time.monotonic() - t0
    reconcile_pass()  # warm: the connection's token and endpoint discovery are cached from here on
    counter.count = 0
    started = time.monotonic()
    done = reconcile_pass()
    wall = time.monotonic() - started
    calls = counter.count
    rows.append(
        f"reconcile pass, {n:3d} active tasks:  {calls} API call(s), {wall * 1000:7.1f} ms wall "
        f"(creating the {n} servers took {created:.0f} s) {done or ''}"
    )
    assert calls == 1, f"one LIST per connection per pass, whatever the number of tasks; saw {calls}"
    assert timezone.now()
