"""The transition table itself and the one function that applies it."""

from __future__ import annotations

import itertools

import pytest
from django.db import transaction

from cloudpivot.exceptions import Conflict, InvalidTransition
from tasks.choices import ATTEMPT_TRANSITIONS, TERMINAL, TRANSITIONS, AttemptState, TaskState
from tasks.models import Attempt, Task
from tasks.services.admission import connection_admit
from tasks.services.lifecycle import attempt_start_claim, attempt_transition, task_lock, task_transition
from tasks.services.submission import task_submit
from tests.builders import hello_spec

S = TaskState


def test_it_declares_all_eleven_states():
    assert len(TaskState) == 11
    assert set(TRANSITIONS) == set(TaskState)


def test_terminal_states_only_lead_back_to_pending_by_explicit_retry():
    for state in TERMINAL:
        assert TRANSITIONS[state] == {S.PENDING}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(TaskState, TaskState)))
def test_it_allows_exactly_the_declared_transitions(world, source, target):
    task, _ = task_submit(user=world.alice, document=hello_spec())
    Task.objects.filter(pk=task.pk).update(state=source)
    with transaction.atomic():
        locked = task_lock(task.pk)
        if target in TRANSITIONS[source]:
            task_transition(task=locked, to=target, reason="test")
        else:
            with pytest.raises(InvalidTransition):
                task_transition(task=locked, to=target)
    task.refresh_from_db()
    assert task.state == (target if target in TRANSITIONS[source] else source)


def test_each_transition_writes_one_event_with_the_next_seq(world):
    task, _ = task_submit(user=world.alice, document=hello_spec())
    for target in (S.CANCELLED, S.PENDING, S.SUBMITTING):
        with transaction.atomic():
            task_transition(task=task_lock(task.pk), to=target, reason=f"to {target}")
    events = list(task.events.values_list("seq", "type", "data__to"))
    assert events == [
        (1, "submitted", None),
        (2, "state", "CANCELLED"),
        (3, "state", "PENDING"),
        (4, "state", "SUBMITTING"),
    ]
    task.refresh_from_db()
    assert task.last_event_seq == 4 and task.state == S.SUBMITTING


def test_a_failed_transition_changes_nothing(world):
    task, _ = task_submit(user=world.alice, document=hello_spec())
    with pytest.raises(InvalidTransition), transaction.atomic():
        task_transition(task=task_lock(task.pk), to=S.SUCCEEDED)
    task.refresh_from_db()
    assert task.state == S.PENDING and task.events.count() == 1


@pytest.mark.django_db(transaction=True)
def test_it_refuses_to_lock_outside_a_transaction(world):
    task, _ = task_submit(user=world.alice, document=hello_spec())
    with pytest.raises(RuntimeError):
        task_lock(task.pk)


# ---------------------------------------------------------------------------- the attempt's own table
@pytest.mark.parametrize(("source", "target"), list(itertools.product(AttemptState, AttemptState)))
def test_an_attempt_moves_exactly_as_its_table_declares(world, source, target):
    attempt = admitted_attempt(world)
    Attempt.objects.filter(pk=attempt.pk).update(state=source)
    attempt.refresh_from_db()
    with transaction.atomic():
        if target in ATTEMPT_TRANSITIONS[source]:
            attempt_transition(attempt=attempt, to=target, fields=[])
            assert Attempt.objects.get(pk=attempt.pk).state == target
        else:
            with pytest.raises(InvalidTransition):
                attempt_transition(attempt=attempt, to=target, fields=[])
            assert Attempt.objects.get(pk=attempt.pk).state == source


def test_an_attempt_read_before_another_writer_moved_it_is_not_written_over(world):
    """Compare-and-set: the stale writer gets a Conflict and its fields are not stored."""
    attempt = admitted_attempt(world)
    stale = Attempt.objects.get(pk=attempt.pk)
    with transaction.atomic():
        attempt_transition(attempt=attempt, to=AttemptState.STARTING, fields=[])
    stale.failure_reason = "stale words"
    with pytest.raises(Conflict, match="no longer created"), transaction.atomic():
        attempt_transition(attempt=stale, to=AttemptState.LOST)
    row = Attempt.objects.get(pk=attempt.pk)
    assert (row.state, row.failure_reason, stale.state) == (AttemptState.STARTING, "", AttemptState.CREATED)


def test_of_two_passes_that_read_an_unstarted_attempt_one_claims_its_start(world):
    attempt = admitted_attempt(world)
    claims = [
        attempt_start_claim(attempt_id=attempt.pk, state=attempt.state, updated_at=attempt.updated_at) for _ in "ab"
    ]
    assert claims == [True, False]
    assert Attempt.objects.get(pk=attempt.pk).state == AttemptState.STARTING


def admitted_attempt(world) -> Attempt:
    task, _ = task_submit(user=world.alice, document=hello_spec())
    connection_admit(connection_id=task.connection_id)
    return Attempt.objects.get(task=task)
