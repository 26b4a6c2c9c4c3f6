"""Putting a django-q2 job on the queue without ever failing the request that asks for it.

Jobs are asked for after a commit: the write is done. If the broker is away (Redis stopped, a lost
connection), raising here would turn a done submission into a 500. The work is not lost either: the
reconcile pass (and the minute schedule that restarts it) finds what is due in the database. So a
refused enqueue is logged and the caller goes on.
"""

from __future__ import annotations

import logging
from typing import Any

from django_q.tasks import async_task

logger = logging.getLogger(__name__)


def enqueue(func: str, *args: Any, **options: Any) -> None:
    try:
        async_task(func, *args, **options)
    except Exception as exc:  # any broker error: the database, not the queue, is the record
        logger.warning("could not queue %s (%s); the reconcile pass will do it", func, exc)
