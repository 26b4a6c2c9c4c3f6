"""Each connection's cloud work in a small pool of threads: one slow cloud never holds up another (issue 16).

A pass used to start, observe and clean up one connection after the other, so an OpenStack create
taking 20 s, or a Kubernetes API server that hangs until its timeout, delayed every other cloud too.
Now the ticker hands each connection's batch (reconcile.connection_batch) to this pool:

- at most one batch in flight per connection, in this process: a connection still at its previous
  batch is skipped, never given a second one beside it (two at once would only fight over the same
  claims and double the calls to a cloud that is already slow);
- at most `size` batches at once (settings.RECONCILE_WORKERS), so many slow clouds cannot take
  every database connection of the process;
- a pass waits for the batches it started at most `budget` seconds; those still running go on, and
  what they did is counted by a later pass;
- each thread uses its own database connection (Django's are per thread) and closes it after every
  batch, on SQLite (whose writers queue on the busy timeout) as on PostgreSQL (back to the pool).

The registry of batches in flight is the process's, not the pool's: a batch a ticker left running
when its minute ended (see `close`) still keeps the next ticker in this process off its connection.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait

from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)

Batch = Callable[[], Mapping[str, int]]

_in_flight: dict[int, Future] = {}  # connection id → its latest batch in this process
_in_flight_lock = threading.Lock()


class ConnectionWorkers:
    """The pool one ticker uses for its minute; `with` closes it (waiting for its batches a while)."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size or settings.RECONCILE_WORKERS
        self._pool = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="reconcile")
        self._mine: set[Future] = set()  # batches started here whose counts are not taken yet

    def __enter__(self) -> ConnectionWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, batches: Mapping[int, Batch], *, budget: float) -> tuple[Counter, list[int]]:
        """Start the batch of each connection that has none in flight; wait for them at most `budget` s.

        Returns what the batches ended since the last call did (late ones of earlier passes too), and
        the connections skipped because their previous batch still runs.
        """
        started, skipped = [], []
        with _in_flight_lock:
            for connection_id, batch in batches.items():
                previous = _in_flight.get(connection_id)
                if previous is not None and not previous.done():
                    skipped.append(connection_id)
                    continue
                future = self._pool.submit(_in_own_db_connection, batch)
                _in_flight[connection_id] = future
                started.append(future)
        self._mine.update(started)
        wait(started, timeout=budget)
        return self._harvest(), skipped

    def close(self, timeout: float | None = None) -> Counter:
        """Wait for this pool's batches at most `timeout` s (DRAIN_SECONDS), then let go of the pool.

        A batch still running then (a cloud call that hangs to its timeout) is left to finish in its
        thread: it is logged, and the registry keeps this process's next ticker off its connection.
        """
        timeout = settings.RECONCILE_DRAIN_SECONDS if timeout is None else timeout
        _done, running = wait(self._mine, timeout=timeout)
        if running:
            logger.warning("%d connection batches still run after %s s; they end by themselves", len(running), timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
        return self._harvest()

    def _harvest(self) -> Counter:
        done = Counter()
        for future in [f for f in self._mine if f.done()]:
            self._mine.discard(future)
            if not future.cancelled():
                done.update(future.result())
        return done


def batches_in_flight() -> list[int]:
    """The connections whose batch still runs in this process (for tests and logs)."""
    with _in_flight_lock:
        return sorted(key for key, future in _in_flight.items() if not future.done())


def _in_own_db_connection(batch: Batch) -> Mapping[str, int]:
    """Run one batch in a pool thread; whatever it raises is logged (its steps are `isolated` already)."""
    try:
        return batch()
    except Exception:
        logger.exception("a connection batch failed as a whole; the next pass tries again")
        return {}
    finally:
        connections.close_all()  # this thread's own
