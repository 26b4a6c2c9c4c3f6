"""A claim renewed from a thread of its own while the claiming code is busy (a cloud call may take minutes).

A worker that holds a row (a start claim, an Operation's lease) proves it is alive by renewing the row every
few seconds, whatever its main thread is doing; SIGKILL or a lost host end the renewals with the worker, and
the claim then runs out for another worker to take. Used by tasks/services/start_claim.py, the ticker
(tasks/services/ticker.py) and resources/services/lease.py.

- `renew` runs every `interval` seconds on a daemon thread (never the caller's: a renewal cannot be late
  because the caller is blocked); returning False ends the beats (the claim is no longer ours).
- A failed renewal is logged and the next beat tries again: the claim has room for a missed beat, and a
  database blip must not end the renewals for good. The thread's connection is closed then, so the next beat
  opens a new one rather than reusing a broken one.
- The thread's own database connection is closed when it ends (Django opens one per thread).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import connection

logger = logging.getLogger(__name__)


class Heartbeat:
    """Calls `renew` every `interval` seconds until stopped, or until `renew` returns False (`ended` then)."""

    def __init__(
        self, renew: Callable[[], bool | None], *, interval: float, name: str, join_timeout: float | None = 5
    ) -> None:
        self.renew, self.interval, self.name, self.join_timeout = renew, interval, name, join_timeout
        self.ended = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the beats and wait for one under way to finish (at most `join_timeout` s; None: as long as it takes)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.join_timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    if self.renew() is False:
                        self.ended = True
                        return
                except Exception as exc:
                    logger.warning("%s: a renewal failed, trying again in %.2f s: %s", self.name, self.interval, exc)
                    connection.close()  # a broken connection is not reused by the next beat
        finally:
            connection.close()  # this thread's own
