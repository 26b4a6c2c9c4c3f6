"""The in-process channel layer's relay between the web processes of one `manage.py serve`
(cloudpivot/channel_layer.py): a ring sent in one process reaches a listener in another."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

from cloudpivot import realtime, ring_sender
from cloudpivot.channel_layer import NAME_ENV, PEERS_ENV, InProcessChannelLayer
from tests import helpers


def names(count: int) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"cloudpivot-layer-test-{os.getpid()}-{run}-{index}" for index in range(count)]


def layer_named(monkeypatch, name: str, peers: list[str], **options) -> InProcessChannelLayer:
    monkeypatch.setenv(PEERS_ENV, ",".join(peers))
    if name:
        monkeypatch.setenv(NAME_ENV, name)
    else:
        monkeypatch.delenv(NAME_ENV, raising=False)
    return InProcessChannelLayer(**options)


async def listening(layer: InProcessChannelLayer, group: str) -> str:
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    return channel


async def test_a_ring_in_one_web_process_reaches_a_listener_of_another(monkeypatch):
    first, second = names(2)
    sender = layer_named(monkeypatch, first, [first, second])
    receiver = layer_named(monkeypatch, second, [first, second])
    channel = await listening(receiver, "task.r1")
    here = await listening(sender, "task.r1")
    message = {"type": "task.changed", "task_id": "r1", "seq": 3}
    sender.send_threadsafe([("task.r1", message), ("project.1", message)])
    assert await asyncio.wait_for(receiver.receive(channel), timeout=5) == message
    assert await asyncio.wait_for(sender.receive(here), timeout=5) == message  # and its own, once
    await asyncio.sleep(0.2)
    for layer, name in ((sender, here), (receiver, channel)):  # nothing relayed back (an emptied queue is removed)
        assert name not in layer.channels or layer.channels[name].empty()


async def test_a_ring_from_another_process_reaches_this_one(monkeypatch):
    """The qcluster or another web process rings: a process of its own, as serve starts them."""
    (name,) = names(1)
    layer = layer_named(monkeypatch, name, [name])
    channel = await listening(layer, realtime.LOG_DOORBELL)
    program = (
        "from cloudpivot.channel_layer import InProcessChannelLayer\n"
        "InProcessChannelLayer().send_threadsafe([('task-logs', {'type': 'task.logs', 'positions': {'t': 9}})])\n"
    )
    environment = {key: value for key, value in os.environ.items() if key != NAME_ENV} | {PEERS_ENV: name}
    subprocess.run([sys.executable, "-c", program], cwd=helpers.BASE_DIR, env=environment, check=True, timeout=60)
    assert await asyncio.wait_for(layer.receive(channel), timeout=5) == {"type": "task.logs", "positions": {"t": 9}}


async def test_many_rings_go_in_several_datagrams_and_all_arrive(monkeypatch):
    first, second = names(2)
    sender = layer_named(monkeypatch, "", [first, second])  # not a web process: it sends only
    receiver = layer_named(monkeypatch, second, [first, second], capacity=200)
    channel = await listening(receiver, realtime.LOG_DOORBELL)
    rings = [(realtime.LOG_DOORBELL, {"type": "task.logs", "positions": {f"{n:04}" * 200: n}}) for n in range(100)]
    sender.send_threadsafe(rings)  # ~80 kB: more than one datagram holds
    got = [await asyncio.wait_for(receiver.receive(channel), timeout=5) for _ in range(100)]
    assert [next(iter(ring["positions"].values())) for ring in got] == list(range(100))


async def test_a_datagram_that_is_not_rings_is_ignored(monkeypatch):
    import socket

    (name,) = names(1)
    layer = layer_named(monkeypatch, name, [name])
    channel = await listening(layer, "task.r2")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"not json", b"\0" + name.encode())
        sock.sendto(b'[["task.r2", 5]]', b"\0" + name.encode())
        sock.sendto(b'[["task.r2", {"type": "task.changed", "seq": 1}]]', b"\0" + name.encode())
    assert await asyncio.wait_for(layer.receive(channel), timeout=5) == {"type": "task.changed", "seq": 1}


async def test_with_peers_a_submit_rings_the_agents_process_and_pokes_nobody(monkeypatch):
    """The agents' long-poll is in another web process (serve's own port for them): the ring goes there,
    and `ring_agents` says it was heard, so no SIGUSR1 is sent to the agent."""
    first, second = names(2)
    agents_process = layer_named(monkeypatch, second, [first, second])
    channel = await listening(agents_process, realtime.AGENT_DOORBELL)
    here = layer_named(monkeypatch, first, [first, second])
    monkeypatch.setattr(realtime, "get_channel_layer", lambda: here)
    monkeypatch.setattr(ring_sender, "get_channel_layer", lambda: here)
    monkeypatch.setattr(realtime, "_long_poll_answered_at", -realtime.AGENT_RETURNS_SECONDS)
    assert realtime.ring_agents()
    assert await asyncio.wait_for(agents_process.receive(channel), timeout=5) == {"type": "agent.doorbell"}
    here.peers = []  # without the relay (a single process): nobody listens here, the caller must poke
    assert not realtime.ring_agents()


async def test_only_rings_of_known_kinds_from_cloudpivots_own_user_are_delivered(monkeypatch, tmp_path):
    """An abstract socket's name is no secret on the host: another user's datagram, or a message of a kind
    CloudPivot never rings, reaches no listener (issue 34)."""
    import socket

    (name,) = names(1)
    layer = layer_named(monkeypatch, name, [name])
    channel = await listening(layer, "task.r3")
    address = b"\0" + name.encode()
    forged = b'[["task.r3", {"type": "task.changed", "task_id": "r3", "seq": 66}]]'
    program = f"import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto({forged!r}, {address!r})"
    subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", program],
                   check=True, timeout=30, cwd=tmp_path)  # fmt: skip
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(b'[["task.r3", {"type": "websocket.send", "text": "hello"}]]', address)
        sock.sendto(b'[["task.r3", {"type": "task.changed", "task_id": "r3", "seq": 1}]]', address)
    assert await asyncio.wait_for(layer.receive(channel), timeout=5) == {
        "type": "task.changed",
        "task_id": "r3",
        "seq": 1,
    }
    await asyncio.sleep(0.3)
    assert channel not in layer.channels or layer.channels[channel].empty()  # nothing else came through
