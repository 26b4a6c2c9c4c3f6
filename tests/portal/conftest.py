"""Portal fixtures: tasks in given states made through the services (no cloud needed), and page clients.

The world (tests/conftest.py): alice admin of alpha, bob submitter in alpha, rita reader in
alpha, charlie submitter in beta only.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
from django.db import transaction
from django.test import Client
from django_q.conf import Conf

from tasks.models import Attempt, Task
from tasks.services.execution import connection_admit
from tasks.services.logs import log_append
from tasks.services.runner_reports import runner_events_apply
from tasks.services.submission import task_submit
from tests import helpers
from tests.conftest import _kill_leftover_runners, hello_spec


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


# ---------------------------------------------------------------------------- a Daphne for the browser
@pytest.fixture(scope="session")
def portal_daphne(django_db_setup, django_db_blocker, tmp_path_factory, server_logs):
    """A real Daphne on the test database that also serves the static files, as `manage.py serve` does.

    The shared `daphne` fixture serves the APIs only: it runs the base settings without
    collectstatic, and WhiteNoise indexes STATIC_ROOT when it starts. This one collects the
    static files into its own var dir first, then starts the same way.
    """
    port = helpers.free_port()
    var_dir = tmp_path_factory.mktemp("portal-var")
    env = helpers.server_environment(port=port, runs_dir=tmp_path_factory.mktemp("portal-runs"))
    env["CLOUDPIVOT_VAR_DIR"] = str(var_dir)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        env=env,
        cwd=helpers.BASE_DIR,
        check=True,
        timeout=120,
    )
    log = server_logs / "portal-daphne.log"
    process = helpers.start_daphne(port=port, env=env, log=log)
    yield SimpleNamespace(url=f"http://127.0.0.1:{port}", port=port, env=env, process=process, log=log)
    helpers.stop_process_group(process)


@pytest.fixture
def portal_live(transactional_db, portal_daphne, settings, tmp_path, monkeypatch):
    """The `live` pattern of tests/conftest.py on portal_daphne: Runners report to it, jobs run inline here."""
    settings.RUNNER_SERVER_URL = portal_daphne.url
    settings.RUNNER_HEARTBEAT_SECONDS = 0.5
    settings.STOP_GRACE_SECONDS = 2.0
    monkeypatch.setattr(Conf, "SYNC", True)
    yield portal_daphne
    _kill_leftover_runners(tmp_path)
