"""The alice/bob/rita/charlie world, and API and page clients for its people.

alice: admin of project `alpha`; bob: submitter in `alpha`; rita: reader in `alpha`;
charlie: submitter in `beta` only. The `local` connection is granted to both projects.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from cloudpivot.accounts.models import Membership, Project, Role
from cloudpivot.accounts.services import api_token_create
from cloudpivot.recent import recent_clear
from clusters.models import CloudConnection
from tests import builders
from tests.stack_client import routed


@pytest.fixture(autouse=True, scope="session")
def _database_work_in_the_test_thread():
    """The test client calls an async view from the test's thread, whose transaction holds the test's rows: its
    database work runs there (cloudpivot/db_threads.py), not in the web process's own threads. Servers the
    tests start in subprocesses keep the default."""
    settings.DB_THREADS = 0
    yield


@pytest.fixture(autouse=True)
def _forget_kept_lookups():
    """A test's rollback sends no delete signals, and SQLite gives the next test's rows the same ids: what a
    process kept for a second (cloudpivot/recent.py) must not outlive the test that read it."""
    recent_clear()
    yield


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
    yield SimpleNamespace(alpha=alpha, beta=beta, local=local, tokens=tokens, runs_dir=tmp_path / "runs", **users)
    if (tmp_path / "runs" / "agent.lock").exists():  # a reconcile pass launched the host agent for a local task
        from tests.plugins.servers import kill_leftover_runners  # here: a plugin imported early is not rewritten

        kill_leftover_runners(tmp_path)


@pytest.fixture
def api(world):
    """api("alice") → an APIClient authenticated with alice's bearer token, through the stack servers choose."""

    def client_for(name: str | None) -> APIClient:
        client = routed(APIClient())
        if name:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.tokens[name]}")
        return client

    return client_for


@pytest.fixture
def pages(world):
    """pages("bob") → a test Client logged in as bob (None: anonymous)."""

    def client_for(name: str | None) -> Client:
        client = routed(Client())
        if name:
            client.force_login(getattr(world, name))
        return client

    return client_for


@pytest.fixture
def make():
    """The task builders of tests/builders.py, for tests that take them as a fixture."""
    return SimpleNamespace(
        submit=builders.submit,
        admit=builders.admit,
        report=builders.report,
        write_log=builders.write_log,
        finished=builders.finished,
        running=builders.running,
    )
