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


def with_vm_host(world, tmp_path, monkeypatch):
    """The usual world plus a `vm-host` connection whose tasks each run as in a task VM: one host program per
    attempt with the attempt's own credential (tests/vm_host.py)."""
    from clusters.backends import BACKENDS
    from clusters.models import CloudConnection

    monkeypatch.setitem(BACKENDS, "vm-host", "tests.vm_host.VmHostBackend")
    runs_dir = tmp_path / "runner-runs"
    connection = CloudConnection.objects.create(
        cloud_id="vm-host", backend="vm-host", options={"runs_dir": str(runs_dir)}
    )
    connection.projects.add(world.alpha)
    world.runs_dir = runs_dir
    return world
