"""A qcluster whose stop always ends, within WORKER_STOP_SECONDS of the signal.

django-q2's qcluster stops from its signal handler: it sets the sentinel's stop Event and joins the sentinel,
with no bound. Two ways that never ends, or ends late:
- A SIGTERM to the whole process group (a test's or a container runtime's killpg, Ctrl-C in a terminal)
  also reaches the sentinel, which leaves SIGTERM at SIG_DFL and dies at once, most often asleep in that
  Event's wait(). Setting a multiprocessing Event then waits for every sleeper to wake (Condition.notify
  counts them), and a dead one never does: the qcluster hangs until its SIGKILL.
- A SIGTERM to the qcluster alone (systemd's KillMode=process, `manage.py serve`) stops the sentinel in
  order: each worker ends its job in hand first, and the ticker job runs for TICKER_SECONDS (55 s). A
  service manager that then kills the qcluster alone (KillMode=process) leaves the sentinel and its workers
  running on, parentless.

Here the handler only notes the request. The main thread then sets the Event from a thread of its own (a
dead sleeper holds up nobody), waits up to WORKER_STOP_SECONDS for the sentinel, and SIGKILLs what is left
of the processes the qcluster started (the sentinel, the workers, the pusher and the monitor; never the
host agent, which runs in its own session). A job killed in hand is safe: nothing it does is lost or done
twice (docs/operations.md, tests/e2e/test_workers.py); a Redis or ORM broker hands it out again.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from django_q.cluster import Cluster


class BoundedCluster(Cluster):
    def __init__(self) -> None:
        self.stop_requested = threading.Event()
        super().__init__()

    def sig_handler(self, signum, frame) -> None:
        """Note the request, and nothing that could block (django-q2's handler joins the sentinel here)."""
        self.stop_requested.set()
        # Cluster.start() polls this Event until the sentinel is up: stop waiting. (Not asked whether it is set:
        # that takes the Event's lock, which the interrupted main thread may hold.)
        self.start_event = None

    def run_until_stopped(self, grace: float) -> bool:
        """Serve until a stop is asked for (True) or the sentinel ends by itself (False); then stop within `grace`."""
        while self.sentinel.is_alive():
            if self.stop_requested.wait(0.5):
                self.stop_within(grace)
                return True
        return self.stop_requested.is_set()

    def stop_within(self, grace: float) -> None:
        started = _descendants(os.getpid())
        if self.sentinel.is_alive() and self.stop_event is not None:
            threading.Thread(target=self.stop_event.set, name="qcluster-stop", daemon=True).start()
        self.sentinel.join(grace)
        for pid, start_time in started.items():
            if _start_time(pid) == start_time:  # still that process (a pid is not reused meanwhile, but check)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.sentinel.join(5)


def _start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/<pid>/stat), or None once it is gone (or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def _descendants(root: int) -> dict[int, str]:
    """Every live process below `root` (children, theirs, …), with its start time."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier and pid not in found}
        found |= frontier
    return {pid: start for pid in found if (start := _start_time(pid)) is not None}
