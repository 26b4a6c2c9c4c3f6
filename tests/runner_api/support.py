"""Programs that write a known byte sequence, so "nothing lost, nothing twice" is checked byte for byte."""

from __future__ import annotations

from tasks.models import Task

LINES = (
    "import sys, time\nfor i in range({n}):\n    print('line %05d ' % i + 'x' * 90, flush=True)\n"
    "    time.sleep({pause})\n"
)


def expected_lines(n: int) -> str:
    return "".join(f"line {i:05d} " + "x" * 90 + "\n" for i in range(n))


def state_changes(task: Task) -> list[str]:
    return list(task.events.filter(type="state").values_list("data__to", flat=True))
