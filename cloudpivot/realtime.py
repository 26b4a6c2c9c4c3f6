"""The doorbell: tell websocket listeners that a task has something new.

The database is the record; a lost ring costs a client nothing but latency (consumers
re-read the database from their last position), so ringing never raises.

Messages (channel layer, JSON-native):
- to `task.<task id>`:    {"type": "task.changed", "task_id", "seq"}   a new TaskEvent (state changes included)
                          {"type": "task.log", "task_id", "position"}   new log bytes up to `position`
- to `project.<project id>`: {"type": "task.changed", "task_id", "seq"}  for dashboards and lists
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)


def task_group(task_id: Any) -> str:
    return f"task.{task_id}"


def project_group(project_id: Any) -> str:
    return f"project.{project_id}"


def _send(groups: list[str], message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        for group in groups:
            async_to_sync(layer.group_send)(group, message)
    except Exception:
        logger.warning("doorbell %s failed", message.get("type"), exc_info=True)


def ring(*, task_id: Any, project_id: Any, seq: int) -> None:
    message = {"type": "task.changed", "task_id": str(task_id), "seq": seq}
    _send([task_group(task_id), project_group(project_id)], message)


def ring_log(*, task_id: Any, position: int) -> None:
    _send([task_group(task_id)], {"type": "task.log", "task_id": str(task_id), "position": position})
