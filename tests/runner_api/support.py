"""Programs that write a known byte sequence, so "nothing lost, nothing twice" is checked byte for byte, and
protocol v2 requests made by hand."""

from __future__ import annotations

import base64

from django.db import transaction

from tasks.models import Attempt, Task
from tasks.services.attempts import attempt_create
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import hello_spec

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


# ---------------------------------------------------------------------------- protocol v2, by hand
def admitted(world, **spec) -> Attempt:
    task, _ = task_submit(user=world.bob, document=hello_spec(**spec))
    with transaction.atomic():
        return attempt_create(task=task_lock(task.pk), reason="test")


def sync(client, *, known=(), attempts=(), wait=0, stopping=(), cleaned=(), name=None):
    body = {
        "protocol": 2,
        "agent": {"name": name or getattr(client, "agent_name", ""), "boot_id": "b1", "version": "2.0", "pid": 4242},
        "known": list(known),
        "stopping": list(stopping),
        "attempts": list(attempts),
        "cleaned": list(cleaned),
        "wait": wait,
    }
    return client.post("/runner/v2/sync", body, format="json")


def ev(seq, type, **data):
    return {"seq": seq, "type": type, "time": "2026-11-30T12:00:00Z", "data": data}


def chunk(stream, offset, data: bytes):
    return {"stream": stream, "offset": offset, "data": base64.b64encode(data).decode()}
