"""Issue 11's streaming load: tasks on `local` that each print timestamped lines at a steady rate.

Each line is `<time printed, seconds since the epoch> <task index> <line number> <padding>`, so a reader can
tell how late it saw a line, and whether it saw one twice or not at all.
"""

from __future__ import annotations

import os

PROGRAM = """
import sys, time
rate, seconds, index = {rate}, {seconds}, {index}
time.sleep(max(0.0, {start_at} - time.time()))  # every task starts printing at the same moment
pause, start = 1.0 / rate, time.time()
for n in range(int(rate * seconds)):
    due = start + n * pause
    time.sleep(max(0.0, due - time.time()))
    sys.stdout.write("%.6f %d %d %s\\n" % (time.time(), index, n, "x" * 60))
    sys.stdout.flush()
"""


def knobs() -> dict[str, float]:
    """BENCH_STREAM_TASKS / _RATE / _SECONDS; the issue's figures are 100 tasks × 20 lines/s × 60 s.
    BENCH_SHORT=1 (or nothing set) runs a quick 20 × 20 lines/s × 15 s."""
    full = os.environ.get("BENCH_SHORT", "1") in ("", "0")
    return {
        "tasks": int(os.environ.get("BENCH_STREAM_TASKS", "100" if full else "20")),
        "rate": float(os.environ.get("BENCH_STREAM_RATE", "20")),
        "seconds": float(os.environ.get("BENCH_STREAM_SECONDS", "60" if full else "15")),
    }


def command(*, index: int, rate: float, seconds: float, start_at: float = 0.0) -> list[str]:
    """The program of task `index`; it prints from `start_at` (seconds since the epoch) or at once."""
    return ["python3", "-c", PROGRAM.format(rate=rate, seconds=seconds, index=index, start_at=start_at)]


def parse(line: bytes) -> tuple[float, int, int] | None:
    """(time printed, task index, line number), or None for a line that is not one of ours."""
    parts = line.split(b" ", 3)
    try:
        return float(parts[0]), int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return None
