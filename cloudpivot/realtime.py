"""The doorbell: tell websocket listeners that a task has something new.

The database is the record; a lost ring costs a client nothing but latency (consumers
re-read the database from their last position), so ringing never raises.

Messages (channel layer, JSON-native):
- to `task.<task id>`:    {"type": "task.changed", "task_id", "seq"}   a new TaskEvent (state changes included)
                          {"type": "task.log", "task_id", "position"}   new log bytes up to `position`
- to `project.<project id>`: {"type": "task.changed", "task_id", "seq"}  for dashboards and lists
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)
# A ring is worth no more than this much of a request's time (Redis away: the 1 s re-reads cover it).
RING_TIMEOUT_SECONDS = 1.0


def task_group(task_id: Any) -> str:
    return f"task.{task_id}"


def project_group(project_id: Any) -> str:
    return f"project.{project_id}"


def _send(groups: list[str], message: dict[str, Any]) -> None:
    _send_each([(group, message) for group in groups])


def _send_each(messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Every (group, message) in one hop into the event loop, sent side by side; a layer that does not
    answer is given up on."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return

    async def send_all() -> None:
        await asyncio.gather(*(layer.group_send(group, message) for group, message in messages))

    try:
        async_to_sync(asyncio.wait_for)(send_all(), RING_TIMEOUT_SECONDS)
    except Exception as exc:
        logger.warning("doorbell %s lost (%s); listeners re-read the database", messages[0][1].get("type"), exc)


def ring(*, task_id: Any, project_id: Any, seq: int) -> None:
    message = {"type": "task.changed", "task_id": str(task_id), "seq": seq}
    _send([task_group(task_id), project_group(project_id)], message)


def ring_on_commit(*, task_id: Any, project_id: Any, seq: int) -> None:
    """Ring once the transaction commits; many events of one task in one transaction ring once, with the last seq.

    A rolled-back transaction drops its hooks, and with them the pending ring.
    """
    rings = _pending_rings()
    previous = rings.changed.get(task_id)
    rings.changed[task_id] = (project_id, max(seq, previous[1]) if previous else seq)


def ring_log_on_commit(*, task_id: Any, position: int) -> None:
    """Ring the log doorbell once the transaction commits, with the task's last position."""
    rings = _pending_rings()
    rings.logs[task_id] = max(position, rings.logs.get(task_id, 0))


class _Rings:
    """The doorbells one transaction rings at commit, all in one hop into the event loop: a batch of Runner
    reports for many tasks costs one hop, not one per task and kind. Registered in a savepoint that is
    rolled back, it goes with it (what it held was rolled back too; a later ring registers a new one)."""

    def __init__(self) -> None:
        self.changed: dict[Any, tuple[Any, int]] = {}
        self.logs: dict[Any, int] = {}

    def __call__(self) -> None:
        messages = []
        for task_id, (project_id, seq) in self.changed.items():
            message = {"type": "task.changed", "task_id": str(task_id), "seq": seq}
            messages += [(task_group(task_id), message), (project_group(project_id), message)]
        for task_id, position in self.logs.items():
            messages.append((task_group(task_id), {"type": "task.log", "task_id": str(task_id), "position": position}))
        _send_each(messages)


def _pending_rings() -> _Rings:
    connection = transaction.get_connection()
    for _savepoints, hook, _robust in connection.run_on_commit:  # Django 5: (savepoint ids, callable, robust)
        if isinstance(hook, _Rings):
            return hook
    hook = _Rings()
    transaction.on_commit(hook)
    return hook


def ring_log(*, task_id: Any, position: int) -> None:
    _send([task_group(task_id)], {"type": "task.log", "task_id": str(task_id), "position": position})


# Host agents' long-polls (runner_api/sync_view.py) listen here: "something for an agent may have changed".
AGENT_DOORBELL = "agent-doorbell"


def ring_agents() -> None:
    _send([AGENT_DOORBELL], {"type": "agent.doorbell"})
