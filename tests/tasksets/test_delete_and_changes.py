"""Retry the failed elements with changes (each element's own task gets the changed spec for its new attempt)
and delete a set that has ended (its elements stay as ordinary tasks)."""

from __future__ import annotations

import json

import pytest

from cloudpivot.accounts.models import AuditEntry
from notifications.models import FeedEvent
from tasks.models import Task
from tasksets.models import SetElement, TaskSet
from tests.tasksets.helpers import URL, materialize, post_set, run_open_elements, template


def finished_with_failures(api, body=None) -> str:
    """A FINISHED set of 4 whose elements 1 and 2 failed; its id."""
    created = post_set(api("bob"), body or {"template": template(), "count": 4}).json()
    materialize()
    run_open_elements(exit_codes={1: 3, 2: 1})
    materialize()
    assert api("bob").get(f"{URL}/{created['id']}").json()["state"] == "FINISHED"
    return created["id"]


def retry(client, set_id, body=None):
    return client.post(f"{URL}/{set_id}/retry-failed", data=json.dumps(body or {}), content_type="application/json")


def test_retry_with_changes_gives_only_the_failed_elements_the_changed_spec(api, world):
    body = {"template": template(name="lr-{{lr}}"), "items": [{"lr": n} for n in range(4)]}
    set_id = finished_with_failures(api, body)
    before = {e.index: (e.task_id, e.task.normalized) for e in SetElement.objects.select_related("task")}
    changes = {"resources": {"memory_mb": 256}, "timeout_seconds": 600, "env": {"WHICH": "lr={{lr}}"}}
    response = retry(api("bob"), set_id, {"changes": changes})
    assert response.status_code == 202, response.json()
    assert response.json()["retrying"] == 2 and response.json()["set"]["state"] == "ACTIVE"
    materialize()
    after = {e.index: e.task for e in SetElement.objects.select_related("task")}
    assert {i: t.pk for i, t in after.items()} == {i: task_id for i, (task_id, _) in before.items()}  # same tasks
    for index in (1, 2):
        task = after[index]
        assert task.state == "PENDING" and task.attempts_count == 1
        assert task.normalized["resources"]["memory_mb"] == 256 and task.timeout_seconds == 600
        assert task.normalized["env"]["WHICH"] == f"lr={index}" and task.normalized["env"]["lr"] == str(index)
        assert task.events.filter(type="spec_changed").count() == 1
    for index in (0, 3):
        assert after[index].normalized == before[index][1] and after[index].state == "SUCCEEDED"
    assert TaskSet.objects.get(pk=set_id).template == body["template"]  # the set's template is as submitted
    assert not SetElement.objects.filter(retry_changes__isnull=False).exists()
    run_open_elements()
    materialize()
    assert api("bob").get(f"{URL}/{set_id}").json()["counts"]["succeeded"] == 4


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"resources": {"memory_mb": 0}}, "changes.resources.memory_mb"),
        ({"bogus": 1}, "changes.bogus"),
        ({"cloud": "elsewhere"}, "changes.cloud"),
        ({"env": {"X": "{{nope}}"}}, "changes.env.X"),
        ({"command": "not a list"}, "changes.command"),
        ({}, "changes"),
    ],
)
def test_a_bad_change_is_a_400_naming_the_field_and_nothing_is_retried(api, world, changes, field):
    set_id = finished_with_failures(api)
    response = retry(api("bob"), set_id, {"changes": changes})
    assert response.status_code == 400, response.json()
    assert field in [error["field"] for error in response.json()["errors"]], response.json()
    assert not SetElement.objects.filter(retry_asked_by__isnull=False).exists()
    assert api("bob").get(f"{URL}/{set_id}").json()["state"] == "FINISHED"
    assert materialize() == 0 and not Task.objects.filter(state="PENDING").exists()


def test_a_reader_may_not_retry_with_changes(api, world):
    set_id = finished_with_failures(api)
    assert retry(api("rita"), set_id, {"changes": {"bogus": 1}}).status_code == 403  # who may, before the changes
    assert retry(api("charlie"), set_id, {"changes": {"timeout_seconds": 60}}).status_code == 404


def test_delete_refuses_an_active_set(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 3}).json()
    materialize()
    response = api("bob").delete(f"{URL}/{created['id']}")
    assert response.status_code == 409 and response.json()["code"] == "set_active"
    assert "cancel it first" in response.json()["detail" if "detail" in response.json() else "message"]
    assert TaskSet.objects.filter(pk=created["id"]).exists()


def test_delete_of_a_finished_set_keeps_its_elements_as_tasks(api, world):
    set_id = finished_with_failures(api)
    task_ids = set(SetElement.objects.values_list("task_id", flat=True))
    response = api("bob").delete(f"{URL}/{set_id}")
    assert response.status_code == 204
    assert not TaskSet.objects.filter(pk=set_id).exists() and not SetElement.objects.exists()
    assert set(Task.objects.values_list("pk", flat=True)) == task_ids  # the tasks stay, as ordinary tasks
    assert api("bob").get(f"/api/v1/tasks/{task_ids.pop()}").status_code == 200
    assert api("bob").get(f"{URL}/{set_id}").status_code == 404
    entry = FeedEvent.objects.get(type="set.deleted", data__set=set_id)
    assert entry.data["elements"] == 4 and entry.data["by"] == "bob"
    assert AuditEntry.objects.filter(action="tasksets-api:task-set-detail", method="DELETE").exists()


def test_delete_of_a_cancelled_set(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 5}).json()
    api("bob").post(f"{URL}/{created['id']}/cancel")
    assert api("alice").delete(f"{URL}/{created['id']}").status_code == 204  # alpha's admin
    assert materialize() == 0


def test_who_may_delete_a_set(api, world):
    set_id = finished_with_failures(api)
    assert api("rita").delete(f"{URL}/{set_id}").status_code == 403  # a reader of alpha
    assert api("charlie").delete(f"{URL}/{set_id}").status_code == 404  # beta: cannot even see it
    assert TaskSet.objects.filter(pk=set_id).exists()
