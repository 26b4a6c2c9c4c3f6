"""An Operation's lease: how the reaper tells a dead worker from one merely slow in a cloud call.

The worker that claims an Operation writes its name (`claimed_by`) and `lease_until` on the row, and a
thread of that worker renews the lease every third of its length while the job runs, whatever the job's own
thread is doing (a cloud call that takes minutes included). SIGKILL, the OOM killer or a host that goes away
end the thread with the job: the lease then runs out, and only then does the reaper hand the Operation to a
new worker to resume (resources.services.run: read the cloud first, call again only when not done).
A worker that finds its lease taken over (it stalled past it: a stopped process) stops at its next poll and
writes nothing more: its `finish` only applies to a row it still holds.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import uuid

from django.conf import settings
from django.db import connection
from django.utils import timezone

from resources.choices import OperationState
from resources.models import Operation

logger = logging.getLogger(__name__)


def lease_seconds() -> float:
    return float(getattr(settings, "INSTANCE_OPERATION_LEASE_SECONDS", 30))


def max_resumes() -> int:
    """How many times one Operation is resumed before it is failed as lost (a job that kills its worker
    every time must not loop for ever)."""
    return int(getattr(settings, "INSTANCE_OPERATION_MAX_RESUMES", 2))


def lease_end() -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=lease_seconds())


def worker_name() -> str:
    """host:pid:random: unique per claim, readable in the admin when a lease is looked at."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """Renews one Operation's lease from a thread until stopped; `lost` once another worker holds it."""

    def __init__(self, operation_id: str, holder: str) -> None:
        self.operation_id, self.holder = operation_id, holder
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{operation_id}", daemon=True)

    def start(self) -> Lease:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        interval = max(lease_seconds() / 3, 0.05)
        try:
            while not self._stop.wait(interval):
                try:
                    renewed = Operation.objects.filter(
                        pk=self.operation_id, state=OperationState.RUNNING, claimed_by=self.holder
                    ).update(lease_until=lease_end())
                except Exception as exc:  # a database blip: try again at the next beat, the lease has room
                    logger.warning("renewing the lease of operation %s: %s", self.operation_id, exc)
                    continue
                if not renewed:  # finished, or resumed by another worker after this one stalled
                    self.lost = True
                    return
        finally:
            connection.close()  # this thread's own connection
