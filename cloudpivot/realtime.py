"""The doorbell: tell websocket listeners that a task has something new at seq N.

The database is the record; a lost ring costs a client nothing but latency, so ringing
never raises.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)


def task_group(task_id: Any) -> str:
    return f"task.{task_id}"


def user_group(user_id: Any) -> str:
    return f"user.{user_id}"


def ring(*, task_id: Any, owner_id: Any, seq: int) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "task.changed", "task_id": str(task_id), "seq": seq}
    try:
        async_to_sync(layer.group_send)(task_group(task_id), message)
        async_to_sync(layer.group_send)(user_group(owner_id), message)
    except Exception:
        logger.warning("doorbell for task %s failed", task_id, exc_info=True)
