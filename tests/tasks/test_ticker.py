"""The ticker sleeps while nothing is due and wakes on the reconcile doorbell or a deadline (issue 11)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from cloudpivot.realtime import ReconcileDoorbell, ring_reconciler
from clusters.models import CloudConnection
from tasks.models import Lease, Task
from tasks.services import ticker
from tasks.services.lifecycle import task_transition
from tasks.services.reconcile import reconcile_due_at
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec


@pytest.fixture
def other_cloud(world, tmp_path, monkeypatch):
    """A connection without a host agent (the test backend of tests/vm_host.py): the pass serves it."""
    from clusters.backends import BACKENDS

    monkeypatch.setitem(BACKENDS, "vm-host", "tests.vm_host.VmHostBackend")
    connection = CloudConnection.objects.create(
        cloud_id="hosts", backend="vm-host", options={"runs_dir": str(tmp_path / "hosts")}
    )
    connection.projects.add(world.alpha)
    return connection


def test_nothing_is_due_on_an_idle_installation(world):
    assert reconcile_due_at(last_pass=timezone.now()) is None


def test_a_task_for_a_cloud_without_an_agent_is_due_at_once(world, other_cloud):
    task_submit(user=world.bob, document=hello_spec(cloud="hosts"))
    now = timezone.now()
    assert reconcile_due_at(last_pass=now, now=now) <= now


def test_a_local_task_whose_agent_is_not_running_is_due_at_once_to_launch_it(world):
    task_submit(user=world.bob, document=hello_spec())
    now = timezone.now()
    assert reconcile_due_at(last_pass=now, now=now) <= now


def test_a_retry_is_due_at_its_persisted_time(world, other_cloud):
    task = task_submit(user=world.bob, document=hello_spec(cloud="hosts"))[0]
    due = timezone.now() + dt.timedelta(seconds=3)
    with transaction.atomic():
        locked = Task.objects.select_for_update().get(pk=task.pk)
        task_transition(task=locked, to="CANCELLED", reason="test")  # out of the admission queue ...
    Task.objects.filter(pk=task.pk).update(state="RETRY_WAIT", next_attempt_at=due)  # ... into a retry's wait
    assert reconcile_due_at(last_pass=timezone.now()) == due


def test_the_doorbell_wakes_a_sleeping_ticker_and_keeps_a_ring_that_came_while_it_worked(world):
    with ReconcileDoorbell() as doorbell:
        assert doorbell.wait(0.05) is False
        threading.Timer(0.2, ring_reconciler).start()
        began = time.monotonic()
        assert doorbell.wait(10) is True
        assert time.monotonic() - began < 5
        ring_reconciler()  # rung while the ticker was busy: the next wait returns at once
        assert doorbell.wait(0) is True
        # (with Redis the ring also comes through the channel layer's relay: a second wake-up, harmless)


@pytest.mark.django_db(transaction=True)
def test_the_ticker_runs_no_passes_for_nothing_but_at_once_for_new_work(world, other_cloud, monkeypatch):
    passes: list[float] = []

    def counted_pass(workers=None):
        passes.append(time.monotonic())
        return {}

    monkeypatch.setattr(ticker, "reconcile_pass", counted_pass)
    thread = threading.Thread(target=lambda: (ticker.ticker_run(seconds=4), connection.close()))
    thread.start()
    time.sleep(2.5)
    assert len(passes) == 1, "an idle ticker ran passes for nothing"  # only a new ticker's first look
    task_submit(user=world.bob, document=hello_spec(cloud="hosts"))  # rings the doorbell after commit
    rung = time.monotonic()
    thread.join(timeout=30)
    assert len(passes) >= 2 and passes[1] - rung < 1.0, "new work waited for the ticker's next round"


@pytest.mark.django_db(transaction=True)
def test_a_local_submit_wakes_the_reconciler_only_when_no_agent_heard_it(world, monkeypatch):
    from cloudpivot import realtime

    with ReconcileDoorbell() as doorbell:
        doorbell.wait(0)
        monkeypatch.setattr(realtime, "ring_agents", lambda: False)  # no long-poll here, and no agent runs
        task_submit(user=world.bob, document=hello_spec())
        assert doorbell.wait(10) is True  # the pass launches the agent
        while doorbell.wait(1):  # with Redis the same ring comes a second time, through the relay
            pass
        monkeypatch.setattr(realtime, "ring_agents", lambda: True)  # an agent's long-poll heard the ring
        task_submit(user=world.bob, document=hello_spec())
        assert doorbell.wait(0.5) is False


@pytest.mark.django_db(transaction=True)
def test_a_pass_longer_than_the_lease_keeps_it(world, monkeypatch):
    """The lease is renewed while a pass runs (issue 16): a second ticker never runs passes beside a slow one."""

    def long_pass(workers=None):
        time.sleep(ticker.LEASE_SECONDS + 4)
        return {}

    monkeypatch.setattr(ticker, "reconcile_pass", long_pass)
    thread = threading.Thread(target=lambda: (ticker.ticker_run(seconds=0.5), connection.close()))
    thread.start()
    try:
        helpers.wait_for(lambda: Lease.objects.filter(name="ticker").exists(), timeout=30, what="the ticker's lease")
        time.sleep(ticker.LEASE_SECONDS + 1)  # the pass still runs (LEASE_SECONDS + 4)
        assert not ticker.lease_acquire("ticker", "a second ticker"), "another ticker took the lease mid-pass"
    finally:
        thread.join(timeout=30)


@pytest.mark.django_db(transaction=True)
async def test_a_tickers_doorbell_beside_a_live_log_websocket_leaves_the_websocket_its_channel_layer(world):
    """With Redis the doorbell's relay receives on a loop of its own (a thread). On the process's layer, that loop
    and the websockets' would be two in one channels_redis instance, which refuses the second ("Two event loops are
    trying to receive() on one channel layer at once"): a websocket that connected meanwhile died."""
    from channels.db import database_sync_to_async as db
    from channels.layers import InMemoryChannelLayer, get_channel_layer
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from cloudpivot import realtime, ring_sender
    from cloudpivot.routing import websocket_urlpatterns
    from tests.builders import running, write_log

    if isinstance(get_channel_layer(), InMemoryChannelLayer):
        pytest.skip("the in-process layer has no relay: the doorbell is the socket alone")
    task, attempt = await db(running)(world.bob)
    with ReconcileDoorbell() as doorbell:
        # The relay listens once a ring sent through the layer alone (not the socket) wakes the doorbell.
        for _ in range(50):
            ring_sender.sender().put([(realtime.RECONCILE_DOORBELL, {"type": "reconcile.doorbell"})])
            if await asyncio.to_thread(doorbell.wait, 0.2):
                break
        else:
            pytest.fail("the doorbell's relay never heard a ring")
        await asyncio.sleep(0.3)  # the relay is back in its receive (the second one in would be refused)
        comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/tasks/{task.pk}/?log_attempt=1")
        comm.scope["user"] = world.bob
        connected, _ = await comm.connect(timeout=5)
        assert connected
        await db(write_log)(attempt, b"hello\n")
        text = ""
        while text != "hello\n":
            message = await comm.receive_json_from(timeout=5)
            text += message["data"] if message["type"] == "log" else ""
        await comm.disconnect()
