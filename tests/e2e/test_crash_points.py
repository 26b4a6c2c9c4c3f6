"""Crash points (issue 16, item 1; docs/crash-points.md): a real process SIGKILLed at a named step, then restarted.

The worker processes are a real `manage.py qcluster` started with CLOUDPIVOT_CRASH_AT=<point>. When its log
says the point was reached (the process is dead by then), the test kills what is left of that cluster and
starts a new one without the switch, as an operator or a supervisor would. The task must then reach its
right end state with one cloud object, one run of its program and no task lost.

On the `local` cloud the program appends a line to a file each time it runs: one line, one run. On the
kmock Kubernetes the test plays the kubelet (and KubeVirt's controller) and counts what the API server
holds and was asked to create. On the development OpenStack the VM's Runner is played on this host from
the user data Nova holds. Which point runs where, and why not elsewhere: docs/crash-points.md.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import pytest
from django.db import connections as db_connections
from django.utils import timezone

from resources.backends.kubevirt import vm_name
from resources.backends.openstack import instance_tag
from resources.models import Instance, Operation
from resources.services.reaper import operations_reap
from resources.services.run import operation_run
from tasks.models import Attempt, Task
from tasks.services.submission import task_submit
from tests import helpers
from tests.clusters.kube_api import VMS
from tests.resources.kubevirt_world import make_connection

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
    created = kube.job_creations()
    assert set(created) == {name}, created  # one Job; asked again (409: adopted) after a start.* crash
    assert len(created) == (2 if point.startswith("start.") else 1), created
    assert name not in kube.jobs()  # and it was removed


# ------------------------------------------------------------------------------ instance Operations
def run_here(operation_id: str) -> None:
    """An Operation's job in a thread of this process, as a worker would run it."""
    try:
        operation_run(operation_id=operation_id)
    finally:
        db_connections.close_all()


LEASE = "5"  # the workers' INSTANCE_OPERATION_LEASE_SECONDS: a dead worker's claim runs out in seconds


def resumed(operation_id: str, *, timeout: float = 60) -> Operation:
    """The reaper's part once the dead worker's lease ran out (its per-minute schedule, run here), then the
    resumed job's end in the restarted workers."""
    helpers.wait_for(
        lambda: Operation.objects.get(pk=operation_id).lease_until < timezone.now(),
        timeout=30,
        what="the dead worker's lease to run out",
    )
    assert ", 1 abandoned operations resumed," in operations_reap()
    helpers.wait_for(
        lambda: Operation.objects.get(pk=operation_id).state in ("succeeded", "failed"),
        timeout=timeout,
        what="the resumed Operation to end",
    )
    operation = Operation.objects.get(pk=operation_id)
    assert operation.state == "succeeded", operation.error_message
    assert operation.resumes == 1 and operation.result["resumed"] == 1
    return operation


def kube_writes(kube, method: str, plural: str = "virtualmachines") -> int:
    requests = kube.call(lambda: list(kube.api.client_requests))
    return sum(1 for r in requests if r.method == method and r.resource is not None and r.resource.plural == plural)


def test_kubevirt_stop_killed_after_its_cloud_call_is_resumed_and_not_asked_again(
    kube, token_file, world, api, workers, settings
):
    """operation.called: the worker dies after KubeVirt accepted the stop, before any read-back. Once its lease
    has run out the reaper hands the Operation to the restarted workers, which read the VM first: Stopped
    already, so the stop succeeds without a second PATCH."""
    settings.INSTANCE_POLL_SECONDS = 0.05
    kube.serve_kubevirt()
    make_connection(kube, token_file, world, vm_flavors={"small": {"vcpus": 1, "memory_mb": 1024}})
    # Created before the workers start, its job run here (the one queued for it then finds it done: a no-op).
    response = api("bob").post(
        "/api/v1/instances",
        {"name": "vm1", "cloud": "kv-lab", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"},
        format="json",
    )
    assert response.status_code == 202, response.json()
    instance_id, create_id = response.json()["instance"], response.json()["id"]
    creating = threading.Thread(target=run_here, args=(create_id,), daemon=True)
    creating.start()
    server = helpers.wait_for(lambda: Instance.objects.get(pk=instance_id).server_id, what="the VM to be created")
    kube.vm_running(server)
    creating.join(30)
    assert Operation.objects.get(pk=create_id).state == "succeeded"

    workers.env = workers.env | {"CLOUDPIVOT_OPERATION_LEASE_SECONDS": LEASE}
    workers.start(crash_at="operation.called")
    response = api("bob").post(f"/api/v1/instances/{instance_id}/actions", {"action": "stop"}, format="json")
    assert response.status_code == 202, response.json()
    stop_id = response.json()["id"]
    workers.restart_after_crash("operation.called")
    assert kube.vm(server)["spec"]["runStrategy"] == "Halted"  # the cloud call was made
    assert kube_writes(kube, "PATCH") == 1
    kube.vm_stopped(server)
    assert Operation.objects.get(pk=stop_id).state == "running"  # and nothing read it back

    resumed(stop_id)
    assert kube_writes(kube, "PATCH") == 1  # read first: already Stopped, so the stop was not asked again
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.status, instance.operation_id) == ("Stopped", None)
    assert list(kube.objects(VMS)) == [server]  # one VM


def test_kubevirt_create_killed_before_the_vm_is_recorded_is_resumed_and_adopts_it(
    kube, token_file, world, api, workers
):
    """operation.called in a create: the VM exists, the instance does not name it. The resumed create asks
    again, gets a 409 for the VM's deterministic name and adopts it: one VM, the instance Running on it."""
    kube.serve_kubevirt()
    make_connection(kube, token_file, world, vm_flavors={"small": {"vcpus": 1, "memory_mb": 1024}})
    workers.env = workers.env | {"CLOUDPIVOT_OPERATION_LEASE_SECONDS": LEASE}
    workers.start(crash_at="operation.called")
    response = api("bob").post(
        "/api/v1/instances",
        {"name": "vm1", "cloud": "kv-lab", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"},
        format="json",
    )
    assert response.status_code == 202, response.json()
    instance_id, create_id = response.json()["instance"], response.json()["id"]
    workers.restart_after_crash("operation.called")
    name = vm_name(instance_id)
    assert list(kube.objects(VMS)) == [name]  # made, and not recorded
    assert Instance.objects.get(pk=instance_id).server_id == ""
    kube.vm_running(name)

    create = resumed(create_id)
    assert create.result["server_id"] == name
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.status, instance.server_id, instance.operation_id) == ("Running", name, None)
    assert list(kube.objects(VMS)) == [name]  # one VM
    assert kube_writes(kube, "POST") == 2  # asked again, answered 409 and adopted


# ------------------------------------------------------------------------------ development OpenStack
@pytest.mark.parametrize("point", ["admission.committed", "start.created", "start.recorded", "cleanup.removed"])
def test_openstack_task_after_a_crash_has_one_server_runs_once_and_succeeds(point, os_live, vms, workers, tmp_path):
    """start.created matters most here: Nova does not keep names unique, so only adoption by the attempt's
    tags keeps a second server from being made. The VM's part (cloud-init, the Runner) is played on this
    host from the user data Nova holds (tests/plugins/openstack.py); the program appends to a file here."""
    from tests.plugins.openstack import INSTALLATION

    marker = tmp_path / "runs.txt"
    workers.env = workers.env | {"CLOUDPIVOT_INSTALLATION_ID": INSTALLATION}  # the session's servers, tagged so
    workers.start(crash_at=point)
    task, _ = task_submit(
        user=os_live.world.bob, document={"cloud": "os-dev", "command": ["sh", "-c", f'echo run >> "{marker}"']}
    )
    if point != "cleanup.removed":
        workers.restart_after_crash(point, timeout=120)
    wait_state(task, {"STARTING"}, timeout=120)
    attempt = Attempt.objects.get(task=task)

    def servers() -> list:
        listed = os_live.conn.compute.servers(tags=f"cloudpivot-{INSTALLATION}")
        return [s for s in listed if s.name == attempt.external_name and s.status != "DELETED"]

    assert [s.id for s in servers()] == [attempt.external_ref]  # one server, the one recorded
    helpers.wait_for(
        lambda: os_live.conn.compute.get_server(attempt.external_ref).status == "ACTIVE", timeout=120, what="ACTIVE"
    )
    vms(os_live.conn, attempt.external_ref)
    wait_state(task, FINAL, timeout=120)
    if point == "cleanup.removed":
        workers.restart_after_crash(point, timeout=120)
    helpers.wait_for(
        lambda: Attempt.objects.get(pk=attempt.pk).cleanup_state == "done", timeout=120, what="the cleanup to end"
    )
    assert task.state == "SUCCEEDED", task.state_reason
    assert marker.read_text() == "run\n"
    assert task.attempts_count == 1
    helpers.wait_for(lambda: not servers(), timeout=60, what="the server gone")


@pytest.fixture
def os_dev(world, openstack_cloud, settings, workers):
    """An `os-dev` connection to the development OpenStack, in the database the workers share."""
    from tests.plugins.openstack import INSTALLATION, os_dev_connection

    os_dev_connection(openstack_cloud, settings, world.alpha)
    workers.env = workers.env | {"CLOUDPIVOT_INSTALLATION_ID": INSTALLATION}
    workers.env["CLOUDPIVOT_OPERATION_LEASE_SECONDS"] = LEASE
    conn = openstack_cloud.conn
    yield conn
    for server in list(conn.compute.servers(tags=f"cloudpivot-{INSTALLATION}")):
        conn.compute.delete_server(server.id, ignore_missing=True)


OS_CREATE = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}


def test_openstack_stop_killed_after_its_cloud_call_is_resumed_and_not_asked_again(os_dev, api, workers):
    """operation.called against Nova: the resumed stop reads SHUTOFF and succeeds without asking again (Nova
    would answer a second stop of a stopped server with a 409). Nova's instance actions count the stops."""
    response = api("bob").post("/api/v1/instances", OS_CREATE, format="json")
    assert response.status_code == 202, response.json()
    instance_id, create_id = response.json()["instance"], response.json()["id"]
    assert operation_run(operation_id=create_id) == "succeeded"  # here; the job queued for it is then a no-op
    server = Instance.objects.get(pk=instance_id).server_id

    workers.start(crash_at="operation.called")
    response = api("bob").post(f"/api/v1/instances/{instance_id}/actions", {"action": "stop"}, format="json")
    assert response.status_code == 202, response.json()
    stop_id = response.json()["id"]
    workers.restart_after_crash("operation.called", timeout=120)
    helpers.wait_for(
        lambda: (lambda s: (s.status, s.task_state))(os_dev.compute.get_server(server)) == ("SHUTOFF", None),
        timeout=60,
        what="Nova to stop the server",
    )
    assert Operation.objects.get(pk=stop_id).state == "running"

    resumed(stop_id, timeout=120)
    stops = [a for a in os_dev.compute.server_actions(server) if a.action == "stop"]
    assert len(stops) == 1, stops  # asked once
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.status, instance.operation_id) == ("Stopped", None)


def test_openstack_create_killed_before_the_server_is_recorded_is_resumed_and_adopts_it(os_dev, api, workers):
    """operation.called in a create against Nova, which keeps no name unique: the resumed create finds the
    server by the instance's tag and adopts it. One server, the instance Running on it."""
    workers.start(crash_at="operation.called")
    response = api("bob").post("/api/v1/instances", OS_CREATE, format="json")
    assert response.status_code == 202, response.json()
    instance_id, create_id = response.json()["instance"], response.json()["id"]
    workers.restart_after_crash("operation.called", timeout=120)

    def servers() -> list[str]:
        listed = os_dev.compute.servers(tags=instance_tag(instance_id))
        return [s.id for s in listed if s.status not in ("DELETED", "SOFT_DELETED")]

    made = servers()
    assert len(made) == 1 and Instance.objects.get(pk=instance_id).server_id == ""  # made, not recorded

    create = resumed(create_id, timeout=120)
    assert create.result["server_id"] == made[0]
    instance = Instance.objects.get(pk=instance_id)
    assert (instance.status, instance.server_id, instance.operation_id) == ("Running", made[0], None)
    assert servers() == made  # one server
