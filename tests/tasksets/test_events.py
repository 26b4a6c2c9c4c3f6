"""Set events: `set.state` for each state a set takes, one `set.finished` with the counts when its last element has
ended; in the feed (in the writer's transaction) and pushed by webhooks like any other entry."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from notifications.feed import feed_sequence
from notifications.models import FeedEvent, WebhookDelivery
from notifications.webhooks import payload, webhooks_fan_out
from tasks.models import Attempt, Task
from tasks.services.admission import connection_admit
from tasksets.choices import TaskSetState
from tasksets.models import TaskSet
from tasksets.services.lifecycle import taskset_transition
from tasksets.services.materialize import sets_due
from tests.builders import report
from tests.tasksets.helpers import URL, materialize, post_set, run_open_elements, template


def set_entries(set_id, type_: str | None = None) -> list[FeedEvent]:
    entries = FeedEvent.objects.filter(type__startswith="set.", data__set=str(set_id)).order_by("id")
    return [entry for entry in entries if type_ is None or entry.type == type_]


def moves(set_id) -> list[tuple]:
    return [(entry.data["from"], entry.data["to"]) for entry in set_entries(set_id, "set.state")]


def test_a_set_that_runs_to_its_end_announces_its_states_and_one_end_with_the_counts(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 3, "max_running": 2}).json()
    assert moves(created["id"]) == [(None, "ACTIVE")]
    accepted = set_entries(created["id"])[0]
    assert accepted.project_id == world.alpha.pk and accepted.message == "accepted: 3 elements"
    for _ in range(4):
        materialize()
        run_open_elements(exit_codes={2: 1})
    materialize()
    assert moves(created["id"]) == [(None, "ACTIVE"), ("ACTIVE", "FINISHED")]
    [finished] = set_entries(created["id"], "set.finished")
    assert finished.data["counts"] == {"succeeded": 2, "failed": 1}
    assert finished.data["state"] == "FINISHED" and finished.data["total"] == 3
    assert finished.message == "finished: 2 succeeded, 1 failed"
    materialize()  # a later pass announces nothing more
    assert len(set_entries(created["id"])) == 3


def test_retrying_failed_elements_opens_the_set_and_it_ends_again_with_new_counts(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 2}).json()
    materialize()
    run_open_elements(exit_codes={1: 3})
    materialize()
    assert api("bob").post(f"{URL}/{created['id']}/retry-failed").status_code == 202
    materialize()
    run_open_elements()
    materialize()
    assert moves(created["id"]) == [
        (None, "ACTIVE"),
        ("ACTIVE", "FINISHED"),
        ("FINISHED", "ACTIVE"),
        ("ACTIVE", "FINISHED"),
    ]
    ends = [entry.data["counts"] for entry in set_entries(created["id"], "set.finished")]
    assert ends == [{"succeeded": 1, "failed": 1}, {"succeeded": 2}]


def test_a_cancelled_set_ends_when_its_last_stopped_element_has_ended(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 10, "max_running": 2}).json()
    materialize()
    connection_admit(connection_id=world.local.pk)
    attempts = list(Attempt.objects.filter(task__state="SUBMITTING"))
    for attempt in attempts:  # two elements run: a cancel has to stop them
        report(attempt, {"type": "started", "data": {"pid": 4242}})
    assert api("bob").post(f"{URL}/{created['id']}/cancel").status_code == 202
    assert moves(created["id"])[-1] == ("ACTIVE", "CANCELLED")
    assert set_entries(created["id"], "set.finished") == []  # its elements are still being stopped
    materialize()
    assert set_entries(created["id"], "set.finished") == []
    report(attempts[0], {"type": "exited", "data": {"exit_code": -15}})
    materialize()
    assert set_entries(created["id"], "set.finished") == []  # one still runs
    now = timezone.now()
    assert sets_due(now, now) is None  # nothing for the pass until it ends (its end rings)
    report(attempts[1], {"type": "exited", "data": {"exit_code": -15}})
    assert Task.objects.filter(state="CANCELLED").count() == 2
    assert sets_due(now, now) == now
    materialize()
    [finished] = set_entries(created["id"], "set.finished")
    assert finished.data == {
        "set": created["id"],
        "set_name": "",
        "state": "CANCELLED",
        "total": 10,
        "counts": {"cancelled": 10},
    }
    materialize()
    assert len(set_entries(created["id"], "set.finished")) == 1
    assert sets_due(now, now) is None


def test_a_set_cancelled_with_nothing_running_ends_at_once(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 5}).json()
    materialize()  # five PENDING elements: a cancel ends them at once
    api("bob").post(f"{URL}/{created['id']}/cancel")
    [finished] = set_entries(created["id"], "set.finished")
    assert finished.data["counts"] == {"cancelled": 5}
    api("bob").post(f"{URL}/{created['id']}/cancel")  # a second cancel: no second end
    assert len(set_entries(created["id"], "set.finished")) == 1


def test_a_state_and_its_entry_commit_or_vanish_together(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 1}).json()
    with pytest.raises(RuntimeError), transaction.atomic():
        task_set = TaskSet.objects.get(pk=created["id"])
        taskset_transition(task_set=task_set, to=TaskSetState.CANCELLED, reason="test")
        assert moves(created["id"])[-1] == ("ACTIVE", "CANCELLED")
        raise RuntimeError("rolled back")
    assert moves(created["id"]) == [(None, "ACTIVE")]
    assert TaskSet.objects.get(pk=created["id"]).state == "ACTIVE"


def test_the_feed_shows_set_entries_to_the_project_and_webhooks_push_them(api, world, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    hook = api("alice").post(
        "/api/v1/webhooks",
        {"project": "alpha", "url": "http://127.0.0.1:9/sets", "event_types": ["set.*"]},
        format="json",
    )
    assert hook.status_code == 201, hook.json()
    created = post_set(api("bob"), {"template": template(), "count": 1}).json()
    materialize()
    run_open_elements()
    materialize()
    feed = api("rita").get("/api/v1/events?after=0&type=set.finished").json()["events"]
    assert [(entry["type"], entry["data"]["set"], entry["task"]) for entry in feed] == [
        ("set.finished", created["id"], None)
    ]
    assert feed[0]["project"] == "alpha" and feed[0]["data"]["counts"] == {"succeeded": 1}
    assert api("charlie").get("/api/v1/events?after=0&type=set.*").json()["events"] == []  # beta sees none
    feed_sequence()
    assert webhooks_fan_out() == 3  # accepted, finished (a state), finished (the end); no task.* entry
    pushed = [
        payload(delivery.event)
        for delivery in WebhookDelivery.objects.select_related("event__project").order_by("event__position")
    ]
    assert [b'"type": "set.state"' in body for body in pushed] == [True, True, False]
    assert b'"type": "set.finished"' in pushed[2]
