"""Batched control (issue 11 item 3) as the host agent meets it: its sync admits and hands out, its
`cleaned` list ends the cleanup, and no background job is queued for any step of a local task."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django_q.brokers import get_broker

from cloudpivot.accounts.models import Quota
from notifications.models import FeedEvent
from tasks.models import Attempt, Task
from tasks.services.attempts import attempt_close, current_attempt
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import attempt_in_the_way, hello_spec
from tests.runner_api import support

pytestmark = pytest.mark.django_db


def sync(client, **body):
    """A sync of the `agent` fixture (tests/runner_api/conftest.py), its answer read."""
    response = support.sync(client, **body)
    assert response.status_code == 200, response.content
    return response.json()


def submit(world, **spec) -> Task:
    return task_submit(user=world.bob, document=hello_spec(**spec))[0]


def test_the_sync_admits_a_pending_task_and_hands_it_out_in_one_go(agent, world):
    task = submit(world, command=["echo", "hi"])
    assert task.state == "PENDING" and not task.attempts.exists()  # nothing admits it but the agent's sync
    [assignment] = sync(agent)["assignments"]
    task.refresh_from_db()
    attempt = task.attempts.get()
    assert assignment["attempt"] == attempt.external_name and assignment["argv"] == ["echo", "hi"]
    assert task.state == "STARTING" and "host agent" in task.state_reason
    states = [e.data["to"] for e in task.events.filter(type="state").order_by("seq")]
    assert states == ["SUBMITTING", "STARTING"]
    assert attempt.admitted_at and attempt.cloud_created_at and attempt.external_ref.endswith(attempt.external_name)


def test_the_sync_keeps_the_quota_and_the_submission_order(agent, world):
    Quota.objects.create(project=world.alpha, max_tasks=1)
    first, second = submit(world), submit(world)
    [assignment] = sync(agent)["assignments"]
    first.refresh_from_db()
    second.refresh_from_db()
    assert assignment["attempt"] == first.attempts.get().external_name
    assert second.state == "PENDING" and second.state_reason.startswith("waiting: ")
    # The first ends (reported in a sync): the same sync admits and hands out the second.
    name = assignment["attempt"]
    exited = {"seq": 1, "type": "exited", "time": "2026-11-30T12:00:00Z", "data": {"exit_code": 0}}
    answer = sync(agent, known=[name], attempts=[{"attempt": name, "events": [exited]}])
    assert answer["attempts"][name]["closed"] is True
    [next_one] = answer["assignments"] or sync(agent, known=[name])["assignments"]
    assert next_one["attempt"] == second.attempts.get().external_name


def test_a_sync_with_nothing_due_writes_nothing(agent, world, django_assert_max_num_queries):
    with django_assert_max_num_queries(4):  # the agent's connections, and the two "anything due?" looks
        assert sync(agent)["assignments"] == []


def test_no_background_job_is_queued_for_a_local_task(agent, world):
    broker = get_broker()
    queued = broker.queue_size()
    task = submit(world, command=["true"])
    [assignment] = sync(agent)["assignments"]
    name = assignment["attempt"]
    events = [
        {"seq": 1, "type": "started", "time": "2026-11-30T12:00:00Z", "data": {"pid": 1}},
        {"seq": 2, "type": "exited", "time": "2026-11-30T12:00:01Z", "data": {"exit_code": 0}},
    ]
    sync(agent, known=[name], attempts=[{"attempt": name, "events": events}])
    sync(agent, cleaned=[name])
    task.refresh_from_db()
    assert task.state == "SUCCEEDED"
    assert Attempt.objects.get(external_name=name).cleanup_state == "done"
    assert broker.queue_size() == queued, "a django-q2 job was queued for a step of a local task"


def test_cleaned_ends_the_cleanup_of_closed_attempts_of_this_agent_only(agent, world):
    closed, still_open = submit(world), submit(world)
    sync(agent)
    with transaction.atomic():
        locked = task_lock(closed.pk)
        attempt_close(task=locked, attempt=current_attempt(locked), outcome="SUCCEEDED", reason="done")
    closed_name = closed.attempts.get().external_name
    open_name = still_open.attempts.get().external_name
    assert Attempt.objects.get(external_name=closed_name).cleanup_state == "pending"
    sync(agent, known=[open_name], cleaned=[closed_name, open_name])
    assert Attempt.objects.get(external_name=closed_name).cleanup_state == "done"
    assert Attempt.objects.get(external_name=open_name).cleanup_state == "not_needed"


def test_an_attempt_cancelled_before_the_agent_took_it_needs_no_cleanup(world):
    from tasks.services import task_cancel
    from tasks.services.admission import admit_all

    task = submit(world)
    admit_all()  # the reconcile pass admitted it (its agent was down); no agent ever held it
    task_cancel(task_id=task.pk, user=world.bob)
    task.refresh_from_db()
    assert task.state == "CANCELLED"
    assert task.attempts.get().cleanup_state == "done"


def statements_of_a_handout(agent, world, count: int) -> tuple[int, int]:
    """The statements of the sync that admits and hands out `count` PENDING tasks, and how many it handed out."""
    held = list(Attempt.objects.values_list("external_name", flat=True))  # the agent runs them: known
    for _ in range(count):
        submit(world)
    with CaptureQueriesContext(connection) as queries:
        handed = len(sync(agent, known=held)["assignments"])
    return len(queries.captured_queries), handed


def test_the_handout_of_many_tasks_takes_as_many_statements_as_that_of_one(agent, world):
    """Issue 11, SQLite's one writer: what a sync admits and hands out is written in bulk (one INSERT of the
    attempts, one UPDATE of the tasks, one INSERT of the events, one of their feed copies), not per task."""
    statements_of_a_handout(agent, world, 1)  # then both syncs measured name an attempt the agent runs
    one, handed_one = statements_of_a_handout(agent, world, 1)
    many, handed_many = statements_of_a_handout(agent, world, 20)
    print(f"\nstatements of the sync that admits and hands out 1 task: {one}, 20 tasks: {many}")
    assert (handed_one, handed_many) == (1, 20)
    assert Task.objects.count() == 22
    assert many == one, f"1 task: {one} statements, 20 tasks: {many}"
    for task in Task.objects.all():
        assert [e.data["to"] for e in task.events.filter(type="state").order_by("seq")] == ["SUBMITTING", "STARTING"]
        assert task.last_event_seq == 3 and task.attempts_count == 1
        copies = FeedEvent.objects.filter(task_id=task.pk)
        states = [
            data["task_state"] for data in sorted(copies.values_list("data", flat=True), key=lambda d: d["task_seq"])
        ]
        assert states == ["PENDING", "SUBMITTING", "STARTING"], "each feed copy says the state its event led to"


def test_a_bad_row_in_the_bulk_handout_is_skipped_with_an_error_and_the_others_are_handed_out(agent, world):
    blocked, fine = submit(world), submit(world)
    squatter = submit(world)  # holds the name `blocked` will ask for: the bulk INSERT fails, then one task at a time
    Task.objects.filter(pk=squatter.pk).update(state="CANCELLED")
    attempt_in_the_way(squatter, of=blocked)
    [assignment] = sync(agent)["assignments"]
    blocked.refresh_from_db(), fine.refresh_from_db()
    assert assignment["attempt"] == fine.attempts.get().external_name
    assert (blocked.state, fine.state) == ("PENDING", "STARTING")
    [error] = blocked.events.filter(type="error")
    assert error.message.startswith("admission failed: IntegrityError")
