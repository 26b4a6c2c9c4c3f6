"""GET /api/v1/events: every task event and operation state of the caller's projects, in one resumable order."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import urllib.request

import pytest
from django.db import transaction
from django.utils import timezone

from cloudpivot.exceptions import InvalidTransition
from notifications.feed import feed_prune, feed_sequence
from notifications.models import FeedEvent
from resources.models import Operation, OperationState
from resources.services.operations import operation_create, operation_transition
from tasks.models import TaskEvent
from tests import builders, helpers


def read_all(client, query: str = "", after: int = 0) -> list[dict]:
    seen: list[dict] = []
    while True:
        page = client.get(f"/api/v1/events?after={after}&limit=3{query}").json()
        seen += page["events"]
        after = page["next_after"]
        if not page["has_more"]:
            return seen


def test_it_lists_every_task_event_in_one_order_resumable_from_any_cursor(world, api):
    first = builders.finished(world.bob)
    second = builders.submit(world.alice)
    feed = read_all(api("rita"))
    stored = list(TaskEvent.objects.filter(task__in=[first, second]).order_by("id"))
    assert [(e["task"], e["data"]["task_seq"]) for e in feed] == [(str(e.task_id), e.seq) for e in stored]
    assert [e["type"] for e in feed] == [f"task.{e.type}" for e in stored]
    ids = [e["id"] for e in feed]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    middle = ids[len(ids) // 2]
    assert read_all(api("rita"), after=middle) == [e for e in feed if e["id"] > middle]
    last = [e for e in feed if e["task"] == str(first.pk)][-1]
    assert last["project"] == "alpha" and last["data"]["task_state"] == "SUCCEEDED"


def test_it_shows_only_the_callers_projects_and_filters(world, api):
    mine = builders.finished(world.charlie)  # project beta
    builders.finished(world.bob)  # project alpha
    assert {e["project"] for e in read_all(api("charlie"))} == {"beta"}
    assert {e["project"] for e in read_all(api("alice"))} == {"alpha"}
    states = read_all(api("charlie"), f"&type=task.state&task={mine.pk}")
    assert states and {e["type"] for e in states} == {"task.state"}
    assert states[-1]["data"]["to"] == "SUCCEEDED"
    assert read_all(api("charlie"), "&type=task.*") == read_all(api("charlie"))
    assert read_all(api("charlie"), "&project=alpha") == []


def test_it_refuses_bad_parameters_with_the_field(world, api):
    for query, field in [("after=-1", "after"), ("wait=31", "wait"), ("task=nope", "task"), ("type=A B", "type.0")]:
        response = api("bob").get(f"/api/v1/events?{query}")
        assert response.status_code == 400, query
        assert response.json()["errors"][0]["field"] == field
    assert api(None).get("/api/v1/events").status_code == 401


def test_every_state_an_operation_reaches_is_in_the_feed_in_order(world, api):
    instance = builders.instance_row(connection=world.local, project=world.alpha, owner=world.bob)
    operation = builders.operation_failed(instance=instance, user=world.bob, message="cloud said no")
    feed = read_all(api("rita"), "&type=operation.state")
    assert [e["data"]["state"] for e in feed] == ["pending", "running", "failed"]
    assert feed[-1]["operation"] == str(operation.pk) and "cloud said no" in feed[-1]["message"]


def test_an_operation_state_and_its_feed_entry_commit_or_vanish_together(world):
    instance = builders.instance_row(connection=world.local, project=world.alpha, owner=world.bob)
    with transaction.atomic():
        operation = operation_create(project=world.alpha, instance=instance, action="stop", requested_by=world.bob)
    with pytest.raises(RuntimeError, match="rolled back"), transaction.atomic():
        operation_transition(operation=Operation.objects.get(pk=operation.pk), to=OperationState.RUNNING)
        raise RuntimeError("rolled back")
    assert Operation.objects.get(pk=operation.pk).state == OperationState.PENDING
    assert list(FeedEvent.objects.filter(operation_id=operation.pk).values_list("data__state", flat=True)) == [
        "pending"
    ]


def test_a_transition_from_a_stale_read_writes_nothing(world):
    """Compare-and-set: a writer that read the row before another moved it neither writes nor announces."""
    instance = builders.instance_row(connection=world.local, project=world.alpha, owner=world.bob)
    with transaction.atomic():
        operation = operation_create(project=world.alpha, instance=instance, action="stop", requested_by=world.bob)
    stale = Operation.objects.get(pk=operation.pk)
    with transaction.atomic():
        assert operation_transition(operation=operation, to=OperationState.RUNNING, claimed_by="first")
    with transaction.atomic():
        assert not operation_transition(operation=stale, to=OperationState.RUNNING, claimed_by="second")
        with pytest.raises(InvalidTransition, match="a pending operation cannot become succeeded"):
            operation_transition(operation=stale, to=OperationState.SUCCEEDED)
    assert Operation.objects.get(pk=operation.pk).claimed_by == "first"
    assert FeedEvent.objects.filter(operation_id=operation.pk).count() == 2  # pending, running: once each


def test_it_answers_410_for_a_cursor_older_than_the_feed_keeps(world, api):
    builders.finished(world.bob)
    feed_sequence()
    newest = FeedEvent.objects.order_by("-position").first().position
    assert feed_prune(before=timezone.now() + dt.timedelta(seconds=1)) > 0
    gone = api("bob").get("/api/v1/events?after=0")
    assert gone.status_code == 410
    assert gone.json()["code"] == "cursor_expired" and gone.json()["oldest_cursor"] == newest
    assert api("bob").get(f"/api/v1/events?after={newest}").json()["events"] == []


def http_page(url: str, token: str, query: str) -> dict:
    request = urllib.request.Request(f"{url}/api/v1/events?{query}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_it_wakes_a_long_poll_when_an_event_comes(transactional_db, daphne, world):
    """Nothing runs the tasks here (no worker): the only new events are the ones the test makes."""
    live = daphne
    builders.submit(world.bob)
    cursor = http_page(live.url, world.tokens["bob"], "after=0")["next_after"]
    got: dict = {}

    def poll():
        started = time.monotonic()
        got["page"] = http_page(live.url, world.tokens["bob"], f"after={cursor}&wait=20")
        got["seconds"] = time.monotonic() - started

    waiter = threading.Thread(target=poll)
    waiter.start()
    time.sleep(1)
    later = builders.submit(world.bob)
    waiter.join(timeout=25)
    assert [e["task"] for e in got["page"]["events"]] == [str(later.pk)]
    assert 1 <= got["seconds"] < 10
    empty_started = time.monotonic()
    assert http_page(live.url, world.tokens["bob"], f"after={got['page']['next_after']}&wait=1")["events"] == []
    assert time.monotonic() - empty_started >= 1


def test_it_replays_the_same_feed_from_cursor_zero_after_a_server_restart(transactional_db, world, tmp_path):
    """Done-when of issue 13: read from cursor 0 after a restart, the feed equals the events stored, in order."""
    builders.finished(world.bob)
    builders.finished(world.bob, exit_code=3)
    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs")
    url = f"http://127.0.0.1:{port}"

    def whole_feed() -> list[dict]:
        events, after = [], 0
        while True:
            page = http_page(url, world.tokens["bob"], f"after={after}&limit=2")
            events += page["events"]
            after = page["next_after"]
            if not page["has_more"]:
                return events

    server = helpers.start_daphne(port=port, env=env, log=tmp_path / "daphne-1.log")
    try:
        before = whole_feed()
    finally:
        helpers.stop_process_group(server)
    server = helpers.start_daphne(port=port, env=env, log=tmp_path / "daphne-2.log")
    try:
        after = whole_feed()
    finally:
        helpers.stop_process_group(server)
    stored = list(TaskEvent.objects.order_by("id"))
    assert before == after
    assert [(e["task"], e["data"]["task_seq"], e["message"]) for e in after] == [
        (str(e.task_id), e.seq, e.message) for e in stored
    ]


def test_a_follower_misses_nothing_while_transactions_commit_out_of_order(transactional_db, world):
    """Writers hold their transactions open for random times, so entries commit in another order than they
    were written; a follower paging by cursor meanwhile still ends with every entry, once each."""
    import random

    from django.db import connection, transaction

    from notifications.feed import FeedFilter, feed_page

    stop = threading.Event()
    followed: list[int] = []
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        chance = random.Random(seed)
        try:
            for _ in range(6):
                with transaction.atomic():
                    builders.submit(world.bob)
                    time.sleep(chance.uniform(0, 0.2))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def follower() -> None:
        cursor = 0
        try:
            while True:
                finished = stop.is_set()
                rows, cursor, _ = feed_page(user=world.rita, where=FeedFilter(), after=cursor, limit=1000)
                followed.extend(row.position for row in rows)
                if finished and not rows:
                    return
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    reader = threading.Thread(target=follower)
    reader.start()
    writers = [threading.Thread(target=writer, args=(seed,)) for seed in range(3)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    stop.set()
    reader.join(timeout=60)
    assert not errors, errors
    stored = list(FeedEvent.objects.order_by("position").values_list("position", flat=True))
    assert followed == stored and len(stored) == TaskEvent.objects.count() > 0
