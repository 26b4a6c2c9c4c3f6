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
import os
import socket
import uuid

from django.conf import settings
from django.utils import timezone

from cloudpivot.heartbeat import Heartbeat
from resources.choices import OperationState
from resources.models import Operation


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
    """Renews one Operation's lease from a thread (cloudpivot/heartbeat.py) until stopped; `lost` once another
    worker holds it. A renewal that fails (a database blip) is tried again at the next beat: the lease has room."""

    def __init__(self, operation_id: str, holder: str) -> None:
        self.operation_id, self.holder = operation_id, holder
        self._beats = Heartbeat(self._renew, interval=max(lease_seconds() / 3, 0.05), name=f"lease-{operation_id}")

    @property
    def lost(self) -> bool:
        """Finished, or resumed by another worker after this one stalled."""
        return self._beats.ended

    @property
    def renewing(self) -> bool:
        return self._beats.alive

    def start(self) -> Lease:
        self._beats.start()
        return self

    def stop(self) -> None:
        self._beats.stop()

    def _renew(self) -> bool:
        return bool(
            Operation.objects.filter(pk=self.operation_id, state=OperationState.RUNNING, claimed_by=self.holder).update(
                lease_until=lease_end()
            )
        )
