"""Crash points (issue 16, item 1; docs/crash-points.md): a real process SIGKILLed at a named step, then restarted.

The worker processes are a real `manage.py qcluster` started with CLOUDPIVOT_CRASH_AT=<point>. When its log
says the point was reached (the process is dead by then), the test kills what is left of that cluster and
starts a new one without the switch, as an operator or a supervisor would. The task must then reach its
right end state with one cloud object, one run of its program and no task lost.

On the `local` cloud the program appends a line to a file each time it runs: one line, one run. On the
kmock Kubernetes the test plays the kubelet and counts the Job creations the API server received.
The development OpenStack is not here yet (see docs/crash-points.md, "Where each point is tested").
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tasks.models import Attempt, Task
from tasks.services.submission import task_submit
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
FINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "UNKNOWN"}


class Workers:
    """A qcluster started with or without the crash switch; restarted clean after the crash."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.process: subprocess.Popen | None = None

    def start(self, crash_at: str = "") -> None:
        env = self.env | ({"CLOUDPIVOT_CRASH_AT": crash_at} if crash_at else {})
        if not crash_at:
            env.pop("CLOUDPIVOT_CRASH_AT", None)
        self.process = helpers.start_qcluster(env=env, log=self.log)

    def crashed(self, point: str, log: Path) -> bool:
        return log.exists() and f"crash point {point} reached" in log.read_text(errors="replace")

    def restart_after_crash(self, point: str, *, log: Path | None = None, timeout: float = 60) -> None:
        """Wait until the point killed a worker (or the process writing `log`), then replace the whole
        cluster with one without the switch."""
        log = log or self.log
        helpers.wait_for(lambda: self.crashed(point, log), timeout=timeout, what=f"a process to die at {point}")
        self.stop(sig=signal.SIGKILL)
        self.start()

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """SIGKILL by default: a qcluster takes up to 15 s to end on SIGTERM (its ticker job finishes first)."""
        if self.process is not None:
            helpers.stop_process_group(self.process, sig=sig)


@pytest.fixture
def workers(daphne, tmp_path):
    """Real worker processes sharing the test database and the session's Daphne (the Runner API)."""
    started = Workers(daphne.env, tmp_path / "qcluster.log")
    yield started
    started.stop()


def wait_state(task: Task, states: set[str], timeout: float = 60) -> Task:
    def reached() -> bool:
        task.refresh_from_db()
        return task.state in states

    helpers.wait_for(reached, timeout=timeout, interval=0.2, what=lambda: f"{sorted(states)}; it is {task.state}")
    return task


def transitions(task: Task) -> list[str]:
    return [event.data["to"] for event in task.events.filter(type="state").order_by("seq")]


# --------------------------------------------------------------------------------------------- local
@pytest.mark.parametrize("point", ["admission.committed", "agent.launched"])
def test_local_task_after_a_crash_runs_once_and_succeeds(point, world, workers, tmp_path):
    """admission.committed kills the worker whose reconcile pass admitted the task (no host agent runs yet);
    agent.launched kills the host agent that worker launched, just after the agent started the program."""
    marker = tmp_path / "runs.txt"
    workers.start(crash_at=point)
    try:
        task, _ = task_submit(
            user=world.bob, document={"cloud": "local", "command": ["sh", "-c", f'echo run >> "{marker}"; sleep 1']}
        )
        # The host agent writes to its own log; the workers launch it with the switch they were given.
        workers.restart_after_crash(point, log=world.runs_dir / "agent.log" if point == "agent.launched" else None)
        if point == "agent.launched":
            assert marker.read_text() == "run\n"  # the program had started when its agent died
        wait_state(task, FINAL, timeout=90)
    finally:
        workers.stop()
        from tests.plugins.servers import kill_leftover_runners

        kill_leftover_runners(tmp_path)
    assert task.state == "SUCCEEDED", task.state_reason
    assert marker.read_text() == "run\n"  # once: never started a second time
    assert task.attempts_count == 1 and Attempt.objects.filter(task=task).count() == 1
    # RUNNING is skipped when the program ended before the new agent looked: it reports start and end at once.
    assert transitions(task) in (
        ["SUBMITTING", "STARTING", "RUNNING", "SUCCEEDED"],
        ["SUBMITTING", "STARTING", "SUCCEEDED"],
    )


# ---------------------------------------------------------------------------------------- Kubernetes
def job_creations(kube) -> list[str]:
    """The names of the Jobs CloudPivot asked the API server to create (a 409 included)."""
    requests = kube.call(lambda: list(kube.api.client_requests))
    return [
        (r.data or {}).get("metadata", {}).get("name", "?")
        for r in requests
        if r.method == "POST" and r.resource is not None and r.resource.plural == "jobs"
    ]


@pytest.mark.parametrize("point", ["admission.committed", "start.created", "start.recorded", "cleanup.removed"])
def test_kubernetes_task_after_a_crash_has_one_job_and_succeeds(point, kube, kube_connection, world, workers):
    workers.start(crash_at=point)
    task, _ = task_submit(
        user=world.bob, document={"cloud": "k3s-lab", "image": "busybox", "command": ["sh", "-c", "echo hi"]}
    )
    name = f"cp-{task.id.hex}-1"
    if point != "cleanup.removed":
        workers.restart_after_crash(point)
    wait_state(task, {"STARTING"})
    kube.schedule(name)
    kube.run(name)
    wait_state(task, {"RUNNING"})
    kube.finish(name, 0)
    wait_state(task, FINAL)
    if point == "cleanup.removed":
        workers.restart_after_crash(point)
    attempt = Attempt.objects.get(task=task)
    helpers.wait_for(
        lambda: Attempt.objects.get(pk=attempt.pk).cleanup_state == "done", timeout=60, what="the cleanup to end"
    )
    assert task.state == "SUCCEEDED", task.state_reason
    assert task.attempts_count == 1
    assert transitions(task) == ["SUBMITTING", "STARTING", "RUNNING", "SUCCEEDED"]
    created = job_creations(kube)
    assert set(created) == {name}, created  # one Job; asked again (409: adopted) after a start.* crash
    assert len(created) == (2 if point.startswith("start.") else 1), created
    assert name not in kube.jobs()  # and it was removed
