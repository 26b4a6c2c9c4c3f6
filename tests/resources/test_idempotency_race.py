"""Two identical requests (same Idempotency-Key) racing: the second, once it holds the locks the first
held, answers with the first's Operation instead of refusing itself as over quota or in flight."""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections, connection

from cloudpivot.accounts.models import Quota
from resources.models import Instance, Operation
from resources.services import instance_create
from resources.services import requests as request_service

pytestmark = pytest.mark.e2e

CREATE = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}


@pytest.mark.django_db(transaction=True)
def test_a_twin_that_committed_while_this_request_waited_for_the_locks_is_replayed(os_world, monkeypatch):
    """The twin runs, in its own thread and database connection, after this request's first key check and
    before it takes the locks: exactly the window two concurrent requests meet in."""
    if connection.vendor != "postgresql":
        pytest.skip("a second connection writing during an open transaction needs PostgreSQL")
    Quota.objects.create(project=os_world.world.alpha, max_instances=1)
    real_lock = request_service._lock
    twin: list = []
    started = threading.Event()

    def run_twin() -> None:
        try:
            twin.append(instance_create(user=os_world.world.bob, data=CREATE, idempotency_key="k-1"))
        finally:
            close_old_connections()

    def lock_after_the_twin(connection_id: int, project_id: int) -> None:
        if not started.is_set():  # this request, not the twin (whose own _lock comes here too)
            started.set()
            thread = threading.Thread(target=run_twin)
            thread.start()
            thread.join()
        real_lock(connection_id, project_id)

    monkeypatch.setattr(request_service, "_lock", lock_after_the_twin)

    operation, created = instance_create(user=os_world.world.bob, data=CREATE, idempotency_key="k-1")

    ((first, first_created),) = twin
    assert first_created and not created
    assert operation.pk == first.pk
    assert Operation.objects.count() == 1 and Instance.objects.count() == 1
