"""The doorbell: one ring per task per transaction, all of a transaction's rings in one hop, none for a rollback."""

from __future__ import annotations

import pytest
from django.db import transaction

from cloudpivot import realtime


@pytest.fixture
def rings(monkeypatch):
    """Each hop into the event loop, as the list of (group, message) it sends."""
    hops = []
    monkeypatch.setattr(realtime, "_send_each", lambda messages: hops.append(messages))
    return hops


@pytest.mark.django_db(transaction=True)
def test_events_of_one_transaction_ring_once_with_the_last_seq(rings):
    with transaction.atomic():
        for seq in (4, 5, 6):
            realtime.ring_on_commit(task_id="t1", project_id=9, seq=seq)
        realtime.ring_on_commit(task_id="t2", project_id=9, seq=1)
        assert rings == []  # nothing before commit
    [hop] = rings
    assert [(group, message["seq"]) for group, message in hop] == [
        ("task.t1", 6),
        ("project.9", 6),
        ("task.t2", 1),
        ("project.9", 1),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_batch_for_many_tasks_rings_in_one_hop_with_each_tasks_last_log_position(rings):
    with transaction.atomic():
        for task in ("t1", "t2", "t3"):
            with transaction.atomic():  # a savepoint per attempt, as a v2 sync batch applies them
                realtime.ring_on_commit(task_id=task, project_id=9, seq=3)
                realtime.ring_log_on_commit(task_id=task, position=10)
                realtime.ring_log_on_commit(task_id=task, position=25)
    [hop] = rings
    logs = [(group, message["position"]) for group, message in hop if message["type"] == "task.log"]
    assert logs == [("task.t1", 25), ("task.t2", 25), ("task.t3", 25)]
    assert len([m for _, m in hop if m["type"] == "task.changed"]) == 6


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_savepoint_drops_its_rings_and_the_others_ring(rings):
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            realtime.ring_log_on_commit(task_id="refused", position=5)
            raise RuntimeError
        with transaction.atomic():
            realtime.ring_log_on_commit(task_id="applied", position=7)
    [hop] = rings
    assert [(group, message["position"]) for group, message in hop] == [("task.applied", 7)]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_rings_nothing(rings):
    with pytest.raises(RuntimeError), transaction.atomic():
        realtime.ring_on_commit(task_id="t1", project_id=9, seq=1)
        raise RuntimeError
    with transaction.atomic():
        realtime.ring_on_commit(task_id="t1", project_id=9, seq=2)
    assert [[message["seq"] for _, message in hop] for hop in rings] == [[2, 2]]
