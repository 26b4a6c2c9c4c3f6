"""The doorbell: one ring per task per transaction, none for a rollback."""

from __future__ import annotations

import pytest
from django.db import transaction

from cloudpivot import realtime


@pytest.fixture
def rings(monkeypatch):
    sent = []
    monkeypatch.setattr(realtime, "_send", lambda groups, message: sent.append((groups, message)))
    return sent


@pytest.mark.django_db(transaction=True)
def test_events_of_one_transaction_ring_once_with_the_last_seq(rings):
    with transaction.atomic():
        for seq in (4, 5, 6):
            realtime.ring_on_commit(task_id="t1", project_id=9, seq=seq)
        realtime.ring_on_commit(task_id="t2", project_id=9, seq=1)
        assert rings == []  # nothing before commit
    assert [(groups, message["seq"]) for groups, message in rings] == [
        (["task.t1", "project.9"], 6),
        (["task.t2", "project.9"], 1),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_rings_nothing(rings):
    with pytest.raises(RuntimeError), transaction.atomic():
        realtime.ring_on_commit(task_id="t1", project_id=9, seq=1)
        raise RuntimeError
    with transaction.atomic():
        realtime.ring_on_commit(task_id="t1", project_id=9, seq=2)
    assert [message["seq"] for _, message in rings] == [2]
