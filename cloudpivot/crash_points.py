"""Crash points: a test-only switch that SIGKILLs this process at a named step (docs/crash-points.md).

`CLOUDPIVOT_CRASH_AT=name[:N]` kills the process the N-th time (1 by default) it reaches the point `name`,
with SIGKILL: no `finally`, no `atexit`, no open transaction committed, as a power cut or the OOM killer
would end it. The end-to-end tests (tests/e2e/test_crash_points.py) set it in a server or worker process,
let it die, start it again without it and check that recovery leaves no duplicate and nothing lost.

Off unless the variable is set: a point is one dictionary look-up then. The production settings refuse to
start with it set (cloudpivot/settings/prod.py). The host agent (standard library only) has its own copy
of the few lines it needs, in runner_api/agent/cloudpivot_supervisor.py.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import Counter

ENV = "CLOUDPIVOT_CRASH_AT"

# Every point, where it is, and what brings the work back after the crash: docs/crash-points.md.
POINTS = frozenset(
    {
        "admission.committed",  # tasks/services/admission.py: the attempt is committed, nobody woken yet
        "start.created",  # tasks/services/attempts.py: the cloud made the object, its ref is not recorded
        "start.recorded",  # tasks/services/attempts.py: the ref is written, the STARTING event not yet
        "cleanup.removed",  # tasks/services/attempts.py: the cloud removed the object, cleanup not marked done
        "operation.called",  # resources/services/run.py: the cloud accepted the action, nothing read back
        "agent.launched",  # runner_api/agent/cloudpivot_agent.py: the program runs, the agent has not noted it
    }
)

_hits: Counter[str] = Counter()
_lock = threading.Lock()


class CrashSpecError(ValueError):
    pass


def crash_spec(value: str | None) -> tuple[str, int] | None:
    """`name[:N]` → (name, N); None when unset. An unknown point or a bad count is an error, not a no-op:
    a test that misspells a point would otherwise pass without ever crashing."""
    if not value or not value.strip():
        return None
    name, _, count = value.strip().partition(":")
    if name not in POINTS:
        raise CrashSpecError(f"{ENV}: unknown crash point {name!r}; the points are {', '.join(sorted(POINTS))}")
    if not count:
        return name, 1
    if not count.isdigit() or int(count) < 1:
        raise CrashSpecError(f"{ENV}: the count after ':' must be a whole number from 1, not {count!r}")
    return name, int(count)


def crash_point(name: str) -> None:
    """SIGKILL this process if the switch names this point and this is the N-th time it is reached."""
    if name not in POINTS:
        raise CrashSpecError(f"crash point {name!r} is not in cloudpivot.crash_points.POINTS")
    value = os.environ.get(ENV)
    if not value:
        return
    spec = crash_spec(value)
    if spec is None or spec[0] != name:
        return
    with _lock:
        _hits[name] += 1
        reached = _hits[name]
    if reached != spec[1]:
        return
    # The one trace a test can wait for; written before the kill, since nothing runs after it.
    sys.stderr.write(f"cloudpivot: crash point {name} reached ({reached}): SIGKILL pid {os.getpid()}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def hits(name: str) -> int:
    """How often this process reached the point while the switch named it (for the unit tests)."""
    return _hits[name]
