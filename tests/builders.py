"""Builders for the rows tests need: task documents, tasks in given states (made through the services,
no cloud needed; `ran` also sets when its attempt held its cores, for usage), and instance, operation and
snapshot rows (written directly: the cloud side is the test's to play).
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from cloudpivot import credentials
from resources.models import Instance, Operation, Snapshot
from resources.services.operations import operation_create, operation_transition
from tasks.models import Attempt, Task
from tasks.services.admission import connection_admit
from tasks.services.logs import log_append
from tasks.services.runner_reports import runner_events_apply
from tasks.services.submission import task_submit


def hello_spec(**extra):
    return {"cloud": "local", "command": ["python3", "-c", "print('hello')"], **extra}


def submit(user, **spec) -> Task:
    """A PENDING task of `user` on the local cloud (admission is queued, nothing runs)."""
    task, _ = task_submit(user=user, document=hello_spec(**spec))
    return task


def admit(task: Task) -> Attempt:
    """Admit the task: attempt 1 exists and the task is SUBMITTING (the start job is queued, not run)."""
    connection_admit(connection_id=task.connection_id)
    return Attempt.objects.get(task=task, number=Task.objects.get(pk=task.pk).attempts_count)


def report(attempt: Attempt, *events: dict) -> None:
    """What the Runner would report: events numbered from the attempt's acked seq on."""
    attempt.refresh_from_db()
    numbered = [{"seq": attempt.acked_seq + i, **event} for i, event in enumerate(events, start=1)]
    runner_events_apply(attempt=attempt, events=numbered)


def write_log(attempt: Attempt, data: bytes, stream: str = "stdout") -> None:
    attempt.refresh_from_db()
    offset = attempt.log_stdout_bytes if stream == "stdout" else attempt.log_stderr_bytes
    with transaction.atomic():
        log_append(attempt=attempt, stream=stream, offset=offset, data=data)


def finished(user, *, exit_code: int = 0, log: bytes = b"hello\n", **spec) -> Task:
    """A task that ran and ended with `exit_code`, with some log text and a result."""
    task = submit(user, **spec)
    attempt = admit(task)
    report(attempt, {"type": "started", "data": {"pid": 4242}})
    if log:
        write_log(attempt, log)
    report(
        attempt,
        {"type": "result", "data": {"summary": {"rows": 3}, "refs": ["s3://bucket/out"]}},
        {"type": "exited", "data": {"exit_code": exit_code}},
    )
    task.refresh_from_db()
    return task


def ran(user, *, began: dt.datetime, ended: dt.datetime | None, cpu: float, memory_mb: int = 0, gpu: int = 0) -> Task:
    """A task whose attempt held `cpu` cores (and memory, GPUs) over [began, ended)."""
    task = finished(user)
    Task.objects.filter(pk=task.pk).update(
        normalized=task.normalized | {"resources": {"cpu": cpu, "memory_mb": memory_mb, "gpu": gpu}}
    )
    Attempt.objects.filter(task=task).update(program_started_at=began, finished_at=ended)
    return task


def running(user, **spec) -> tuple[Task, Attempt]:
    task = submit(user, **spec)
    attempt = admit(task)
    report(attempt, {"type": "started", "data": {"pid": 4242}})
    task.refresh_from_db()
    return task, attempt


def instance_row(*, connection, project, owner, **fields) -> Instance:
    """An Instance row as if created earlier (a small OpenStack server by default; override any field)."""
    values = {
        "name": "vm1",
        "backend": "openstack",
        "flavor": "cp.tiny",
        "vcpus": 1,
        "memory_mb": 64,
        "image": "cp-runner-fake",
    }
    return Instance.objects.create(connection=connection, project=project, owner=owner, **(values | fields))


def operation_failed(
    *, instance: Instance, user, action: str = "start", message: str = "the cloud said no"
) -> Operation:
    """An Operation asked by `user` on `instance`, taken by a worker and ended failed, through its one writer."""
    with transaction.atomic():
        operation = operation_create(project=instance.project, instance=instance, action=action, requested_by=user)
    with transaction.atomic():
        operation_transition(operation=operation, to="running", claimed_by="a worker")
    with transaction.atomic():
        operation_transition(operation=operation, to="failed", error_message=message, error_kind="failed")
    return operation


def left_by_a_dead_worker(instance, action, *, called: bool, resumes: int = 0, **params) -> Operation:
    """`running`, claimed by a worker whose lease ran out a second ago, as SIGKILL leaves it."""
    now = timezone.now()
    operation = Operation.objects.create(
        project=instance.project,
        instance=instance,
        action=action,
        params=params,
        requested_by=instance.owner,
        state="running",
        started_at=now - dt.timedelta(seconds=10),
        claimed_by="elsewhere:1:dead",
        lease_until=now - dt.timedelta(seconds=1),
        resumes=resumes,
        called_at=now - dt.timedelta(seconds=9) if called else None,
    )
    Instance.objects.filter(pk=instance.pk).update(operation=operation)
    return operation


def snapshot_row(*, connection, project, owner, **fields) -> Snapshot:
    """A Snapshot row (available, no image unless given: deleting it asks the cloud nothing)."""
    values = {"name": "snap", "status": "available"}
    return Snapshot.objects.create(connection=connection, project=project, owner=owner, **(values | fields))


def attempt_in_the_way(task: Task, of: Task) -> Attempt:
    """An attempt of `task` holding the name `of`'s first attempt will ask for: storing that attempt then fails."""
    return Attempt.objects.create(
        task=task,
        number=9,
        external_name=f"cp-{of.id.hex}-1",
        credential_nonce=credentials.new_nonce(),
        runner_token_hash="x" * 64,
    )


def runner_client(attempt: Attempt):
    """An API client holding the attempt's own credential (cpr_…), as a task VM's host program calls."""
    from rest_framework.test import APIClient

    client = APIClient()
    token = credentials.runner_credential(external_name=attempt.external_name, nonce=attempt.credential_nonce)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def v1_runner_client(attempt: Attempt):
    """The same, for a Runner of protocol v1 in a VM booted before v1 was retired (runner_api/protocol_v1.py):
    the attempt is dated just before the retirement, which is what lets v1 answer it."""
    from runner_api.protocol_v1 import v1_retired_at

    if (retired_at := v1_retired_at()) is not None:
        Attempt.objects.filter(pk=attempt.pk).update(created_at=retired_at - dt.timedelta(seconds=1))
        attempt.created_at = retired_at - dt.timedelta(seconds=1)
    return runner_client(attempt)
