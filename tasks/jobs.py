"""django-q2 entry points (thin) and the helpers that enqueue them after commit.

Dispatch is prompt: a submit enqueues admission, admission enqueues the start. The
ticker job is the safety net and the clock: it holds a lease and runs a reconcile pass
about every half second for a minute, then enqueues its successor. A ticker is also
enqueued whenever a worker process starts, and the minute schedule restarts the chain if
it ever breaks; extra tickers find the lease held and end.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django_q.tasks import async_task

logger = logging.getLogger(__name__)
TICK_INTERVAL_SECONDS = 0.5
# Short, and renewed every pass: a ticker killed with its worker blocks the next one only this long.
LEASE_SECONDS = 5


def enqueue_tick() -> None:
    async_task("tasks.jobs.tick", task_name="ticker", q_options={"group": "ticker"})


def tick_on_worker_spawn(**signal_kwargs) -> None:
    """django-q2's post_spawn receiver. In sync mode (tests) jobs run inline, where this would recurse."""
    from django_q.conf import Conf

    if not Conf.SYNC:
        enqueue_tick()


def enqueue_admission() -> None:
    async_task("tasks.jobs.admit", task_name="admit", q_options={"group": "admit"})


def enqueue_start(attempt_id: int) -> None:
    async_task("tasks.jobs.start", attempt_id, q_options={"group": "start"})


def enqueue_cleanup(attempt_id: int) -> None:
    async_task("tasks.jobs.cleanup", attempt_id, q_options={"group": "cleanup"})


def enqueue_stop(attempt_id: int) -> None:
    async_task("tasks.jobs.stop", attempt_id, q_options={"group": "stop"})


def admit() -> str:
    from tasks.services.execution import admit_all

    return f"admitted {admit_all()}"


def start(attempt_id: int) -> str:
    from tasks.services.execution import attempt_start

    return attempt_start(attempt_id=attempt_id)


def cleanup(attempt_id: int) -> str:
    from tasks.models import Attempt
    from tasks.services.reconcile import attempt_cleanup

    attempt = Attempt.objects.select_related("task__connection").get(pk=attempt_id)
    return "cleaned" if attempt_cleanup(attempt) else "not yet (retried by the ticker)"


def stop(attempt_id: int) -> str:
    from clusters.backends import get_backend
    from tasks.models import Attempt
    from tasks.services.execution import attempt_ref
    from tasks.services.reconcile import copy_cloud_logs

    attempt = Attempt.objects.select_related("task__connection").get(pk=attempt_id)
    backend = get_backend(attempt.task.connection)
    if not backend.uses_runner:
        copy_cloud_logs(backend, attempt)  # what the cloud holds of the log goes with the object
    backend.stop(attempt_ref(attempt))
    return "stopped"


def tick(seconds: float | None = None) -> str:
    """Run reconcile passes for about a minute while holding the ticker lease."""
    from tasks.services.reconcile import reconcile_pass

    holder = f"{socket.gethostname()}:{os.getpid()}:{time.monotonic_ns()}"
    if not lease_acquire("ticker", holder):
        # A live ticker renews its lease every pass; one that died lets it expire. Look once more after that.
        time.sleep(LEASE_SECONDS + TICK_INTERVAL_SECONDS)
        if not lease_acquire("ticker", holder):
            return "another ticker holds the lease"
    deadline = time.monotonic() + (seconds if seconds is not None else settings.TICKER_SECONDS)
    passes = 0
    try:
        while time.monotonic() < deadline:
            done = reconcile_pass()
            if done:
                logger.info("reconcile pass: %s", done)
            passes += 1
            if not lease_acquire("ticker", holder):
                return f"lost the lease after {passes} passes"
            time.sleep(TICK_INTERVAL_SECONDS)
    finally:
        lease_release("ticker", holder)
    if seconds is None:
        enqueue_tick()
    return f"{passes} passes"


def lease_acquire(name: str, holder: str) -> bool:
    """Take or renew the lease if it is free, expired, or already ours."""
    from tasks.models import Lease

    now = timezone.now()
    expires = now + dt.timedelta(seconds=LEASE_SECONDS)
    with transaction.atomic():
        free_or_mine = Q(expires_at__lt=now) | Q(holder=holder)
        updated = Lease.objects.filter(free_or_mine, name=name).update(holder=holder, expires_at=expires)
        if updated:
            return True
        try:
            with transaction.atomic():
                Lease.objects.create(name=name, holder=holder, expires_at=expires)
            return True
        except IntegrityError:
            return False


def lease_release(name: str, holder: str) -> None:
    from tasks.models import Lease

    Lease.objects.filter(name=name, holder=holder).delete()
