"""How Operations end when things go wrong: internal errors, dead workers, lost enqueues, lock hand-over."""

from __future__ import annotations

import logging

import pytest

from resources.models import Operation
from resources.services import instance_create
from resources.services.run import operation_run

pytestmark = pytest.mark.e2e

CREATE = {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"}


def test_an_unexpected_error_shows_users_a_reference_and_logs_the_details(os_world, caplog):
    operation, _ = instance_create(user=os_world.world.bob, data=CREATE)
    # a create Operation whose parameters lost the flavor id: the runner fails with a KeyError, a bug of ours
    Operation.objects.filter(pk=operation.pk).update(params={"image": "secret-internal-words"})
    with caplog.at_level(logging.ERROR, logger="resources.services.run"):
        operation_run(operation_id=str(operation.pk))
    operation.refresh_from_db()
    assert operation.state == "failed" and operation.error_kind == "internal"
    assert operation.error_message == (f"internal error (reference {operation.pk}); the details are in the server log")
    record = next(r for r in caplog.records if str(operation.pk) in r.getMessage())
    assert record.exc_info and record.exc_info[0] is KeyError
