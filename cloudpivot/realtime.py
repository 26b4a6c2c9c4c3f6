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
    layer = get_channel_layer()
    if layer is None:
        return

    async def send_all() -> None:
        for group in groups:
            await layer.group_send(group, message)

    try:  # one hop into the event loop for all groups; a layer that does not answer is given up on
        async_to_sync(asyncio.wait_for)(send_all(), RING_TIMEOUT_SECONDS)
    except Exception as exc:
        logger.warning("doorbell %s lost (%s); listeners re-read the database", message.get("type"), exc)


def ring(*, task_id: Any, project_id: Any, seq: int) -> None:
    message = {"type": "task.changed", "task_id": str(task_id), "seq": seq}
    _send([task_group(task_id), project_group(project_id)], message)


def ring_on_commit(*, task_id: Any, project_id: Any, seq: int) -> None:
    """Ring once the transaction commits; many events of one task in one transaction ring once, with the last seq.

    A rolled-back transaction drops its hooks, and with them the pending ring.
    """
    connection = transaction.get_connection()
    for _savepoints, hook, _robust in connection.run_on_commit:  # Django 5: (savepoint ids, callable, robust)
        if getattr(hook, "ring_task_id", None) == task_id:
            hook.seq = max(hook.seq, seq)
            return

    def hook() -> None:
        ring(task_id=task_id, project_id=project_id, seq=hook.seq)

    hook.ring_task_id, hook.seq = task_id, seq
    transaction.on_commit(hook)


def ring_log(*, task_id: Any, position: int) -> None:
    _send([task_group(task_id)], {"type": "task.log", "task_id": str(task_id), "position": position})


# Host agents' long-polls (runner_api/sync_view.py) listen here: "something for an agent may have changed".
AGENT_DOORBELL = "agent-doorbell"


def ring_agents() -> None:
    _send([AGENT_DOORBELL], {"type": "agent.doorbell"})
