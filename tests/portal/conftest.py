"""Portal fixtures: tasks in given states made through the services (no cloud needed), and page clients.

The world (tests/conftest.py): alice admin of alpha, bob submitter in alpha, rita reader in
alpha, charlie submitter in beta only.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import transaction
from django.test import Client

from tasks.models import Attempt, Task
from tasks.services.execution import connection_admit
from tasks.services.logs import log_append
from tasks.services.runner_reports import runner_events_apply
from tasks.services.submission import task_submit
from tests.conftest import hello_spec


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


def running(user, **spec) -> tuple[Task, Attempt]:
    task = submit(user, **spec)
    attempt = admit(task)
    report(attempt, {"type": "started", "data": {"pid": 4242}})
    task.refresh_from_db()
    return task, attempt


@pytest.fixture
def make():
    return SimpleNamespace(
        submit=submit, admit=admit, report=report, write_log=write_log, finished=finished, running=running
    )


@pytest.fixture
def pages(world):
    """pages("bob") → a test Client logged in as bob (None: anonymous)."""

    def client_for(name: str | None) -> Client:
        client = Client()
        if name:
            client.force_login(getattr(world, name))
        return client

    return client_for
