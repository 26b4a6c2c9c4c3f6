"""The alice/bob/rita/charlie world, API clients, and a real Daphne on loopback for Runner tests.

alice: admin of project `alpha`; bob: submitter in `alpha`; rita: reader in `alpha`;
charlie: submitter in `beta` only. The `local` connection is granted to both projects.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django_q.conf import Conf
from playwright.sync_api import sync_playwright
from rest_framework.test import APIClient

from cloudpivot.accounts.models import Membership, Project, Role
from cloudpivot.accounts.services import api_token_create
from clusters.models import CloudConnection
from tests import helpers


@pytest.fixture
def world(db, tmp_path):
    User = get_user_model()
    alpha = Project.objects.create(slug="alpha", name="Alpha lab")
    beta = Project.objects.create(slug="beta", name="Beta lab")
    users = {}
    for name, project, role in [
        ("alice", alpha, Role.ADMIN),
        ("bob", alpha, Role.SUBMITTER),
        ("rita", alpha, Role.READER),
        ("charlie", beta, Role.SUBMITTER),
    ]:
        user = User.objects.create_user(name, f"{name}@example.org", "pw-" + name)
        Membership.objects.create(project=project, user=user, role=role)
        users[name] = user
    local = CloudConnection.objects.create(
        cloud_id="local", backend="local", options={"runs_dir": str(tmp_path / "runs")}
    )
    local.projects.add(alpha, beta)
    tokens = {name: api_token_create(user=user, name="test")[1] for name, user in users.items()}
    return SimpleNamespace(alpha=alpha, beta=beta, local=local, tokens=tokens, runs_dir=tmp_path / "runs", **users)


@pytest.fixture
def api(world):
    """api("alice") → an APIClient authenticated with alice's bearer token."""

    def client_for(name: str | None) -> APIClient:
        client = APIClient()
        if name:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.tokens[name]}")
        return client

    return client_for


def hello_spec(**extra):
    return {"cloud": "local", "command": ["python3", "-c", "print('hello')"], **extra}


# ---------------------------------------------------------------------------- real servers on loopback
@pytest.fixture(scope="session")
def server_logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("server-logs")


@pytest.fixture(scope="session")
def daphne(django_db_setup, django_db_blocker, tmp_path_factory, server_logs):
    """A real Daphne serving the API and the Runner API on the test database."""
    port = helpers.free_port()
    runs_dir = tmp_path_factory.mktemp("daphne-runs")
    env = helpers.server_environment(port=port, runs_dir=runs_dir)
    process = helpers.start_daphne(port=port, env=env, log=server_logs / "daphne.log")
    yield SimpleNamespace(
        url=f"http://127.0.0.1:{port}", port=port, env=env, process=process, log=server_logs / "daphne.log"
    )
    helpers.stop_process_group(process)


@pytest.fixture
def live(transactional_db, daphne, settings, tmp_path, monkeypatch):
    """Runners started by this process report to the real Daphne; enqueued jobs run inline here.

    The reconcile loop itself is driven by the test (`drive`), as a worker would.
    """
    settings.RUNNER_SERVER_URL = daphne.url
    settings.RUNNER_HEARTBEAT_SECONDS = 0.5
    settings.STOP_GRACE_SECONDS = 2.0
    monkeypatch.setattr(Conf, "SYNC", True)
    yield daphne
    _kill_leftover_runners(tmp_path)


def _kill_leftover_runners(root: Path) -> None:
    """A failed test must not leave Runners, host agents or programs behind to disturb the next one."""
    import json

    for lock in root.rglob("agent.lock"):
        text = lock.read_text().strip()
        if text.isdigit():
            try:
                os.kill(int(text), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for program in root.rglob("program.json"):
        try:
            os.killpg(int(json.loads(program.read_text())["pid"]), signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass
    for pid_file in list(root.rglob("runner.pid")) + list(root.rglob("state.json")):
        try:
            text = pid_file.read_text()
            pids = (
                [int(text)]
                if pid_file.name == "runner.pid"
                else [int(v) for k, v in __import__("json").loads(text).items() if k.endswith("pid") and v]
            )
        except (OSError, ValueError):
            continue
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    time.sleep(0.1)


# ---------------------------------------------------------------------------- a browser
@pytest.fixture(scope="module")
def browser():
    """Headless Chromium driven by Playwright; one per test module."""
    if not Path(helpers.CHROMIUM).exists():
        pytest.fail(f"{helpers.CHROMIUM} is missing: `apt-get install -y chromium` (make test does it)")
    # Playwright's sync API keeps an asyncio loop in this thread; Django's ORM refuses to run beside
    # a running loop unless told that it is safe, which it is: nothing else runs on that loop.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=helpers.CHROMIUM, args=helpers.CHROMIUM_ARGS)
        yield browser
        browser.close()
