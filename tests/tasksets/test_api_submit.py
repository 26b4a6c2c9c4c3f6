"""POST /api/v1/task-sets: one row at accept, every element checked first, idempotent like a task submit."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tasksets.models import SetElement, TaskSet
from tests.tasksets.helpers import URL, materialize, post_set, template


def test_it_accepts_a_set_as_one_row_and_shows_every_element_waiting(api, world):
    response = post_set(api("bob"), {"template": template(name="sweep"), "count": 10_000, "max_running": 5})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "ACTIVE" and body["total"] == 10_000 and body["materialized"] == 0
    assert body["project"] == "alpha" and body["cloud"] == "local" and body["owner"] == "bob"
    assert body["counts"]["waiting"] == 10_000 and body["counts"]["pending"] == 0
    assert response["Location"] == f"{URL}/{body['id']}"
    assert TaskSet.objects.count() == 1 and Task.objects.count() == 0


def test_a_10000_element_set_makes_no_more_tasks_than_its_room(api, world, settings):
    settings.TASK_SET_AHEAD = 100
    throttled = post_set(api("bob"), {"template": template(), "count": 10_000, "max_running": 7}).json()
    free = post_set(api("bob"), {"template": template(), "count": 10_000}).json()
    materialize()
    materialize()  # a second pass makes nothing more: the first ones have not ended
    assert SetElement.objects.filter(task_set_id=throttled["id"]).count() == 7
    assert SetElement.objects.filter(task_set_id=free["id"]).count() == 100
    assert Task.objects.count() == 107 and TaskSet.objects.count() == 2
    got = api("bob").get(f"{URL}/{throttled['id']}").json()
    assert got["materialized"] == 7 and got["counts"]["pending"] == 7 and got["counts"]["waiting"] == 9_993


def test_each_element_gets_its_index_and_parameters_substituted(api, world):
    body = {
        "template": template(
            name="lr-{{lr}}", command=["train", "--lr={{lr}}", "--seed={{index}}"], env={"OUT": "/o/{{lr}}"}
        ),
        "items": [{"lr": 0.1, "fast": True}, {"lr": "1e-3", "fast": False}],
    }
    created = post_set(api("bob"), body).json()
    materialize()
    tasks = [element.task for element in SetElement.objects.filter(task_set_id=created["id"]).order_by("index")]
    first, second = (task.normalized for task in tasks)
    assert first["command"] == ["train", "--lr=0.1", "--seed=0"]
    assert second["command"] == ["train", "--lr=1e-3", "--seed=1"]
    assert first["env"] == {"OUT": "/o/0.1", "lr": "0.1", "fast": "true", "CLOUDPIVOT_SET_INDEX": "0"}
    assert second["env"]["CLOUDPIVOT_SET_INDEX"] == "1" and second["env"]["fast"] == "false"
    assert [task.name for task in tasks] == ["lr-0.1", "lr-1e-3"]
    assert all(task.owner == world.bob and task.project == world.alpha for task in tasks)
    assert tasks[0].events.first().type == "submitted"  # made through the task submission, with its event


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"template": template(command=["run", "{{lr}}"]), "items": [{"lr": 1}] * 17 + [{"rate": 2}]}, "items.17.lr"),
        ({"template": template(), "items": [{"lr": 1}, {"lr": [1, 2]}]}, "items.1.lr"),
        ({"template": template(), "items": [{"lr": 1}, "lr=2"]}, "items.1"),
        ({"template": template(), "items": [{"1bad": 1}]}, "items.0.1bad"),
        ({"template": template(command=["run", "{{lr}}"]), "count": 3}, "template.command.1"),
        ({"template": template(command="echo hi"), "count": 3}, "template.command"),
        ({"template": template(cloud="mars"), "count": 3}, "template.cloud"),
        ({"template": template(), "count": 100_001}, "count"),
        ({"template": template(), "count": 0}, "count"),
        ({"template": template(), "count": 3, "items": [{}]}, "count"),
        ({"template": template()}, "count"),
        ({"template": template(), "items": []}, "items"),
        ({"template": template(), "count": 3, "max_running": 0}, "max_running"),
        ({"template": template(), "count": 3, "colour": "red"}, "colour"),
        ({"template": "echo", "count": 3}, "template"),
    ],
)
def test_a_bad_set_is_a_400_naming_the_field_and_nothing_is_created(api, world, body, field):
    response = post_set(api("bob"), body)
    assert response.status_code == 400, response.json()
    error = response.json()
    assert error["code"] == "invalid" and error["message"]
    assert field in [e["field"] for e in error["errors"]], error
    assert TaskSet.objects.count() == 0 and Task.objects.count() == 0


def test_the_element_limit_is_a_setting(api, world, settings):
    settings.TASK_SET_MAX_ELEMENTS = 5
    response = post_set(api("bob"), {"template": template(), "items": [{"a": i} for i in range(6)]})
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error == {"field": "items", "message": "at most 5 elements in one set (this one has 6)"}


def test_a_100000_item_set_is_accepted_in_one_request(api, world):
    items = [{"shard": i} for i in range(100_000)]
    response = post_set(api("bob"), {"template": template(command=["work", "{{shard}}"]), "items": items})
    assert response.status_code == 201, response.json()
    assert response.json()["counts"]["waiting"] == 100_000 and Task.objects.count() == 0


def test_a_set_that_could_never_fit_is_refused_like_a_task(api, world):
    from cloudpivot.accounts.models import Quota

    Quota.objects.create(project=world.alpha, max_vcpu=2)
    response = post_set(api("bob"), {"template": template(resources={"cpu": 4}), "count": 3})
    assert response.status_code == 422, response.json()
    assert TaskSet.objects.count() == 0


def test_a_reader_cannot_submit_a_set(api, world):
    response = post_set(api("rita"), {"template": template(), "count": 2})
    assert response.status_code == 403
    assert TaskSet.objects.count() == 0


def test_same_idempotency_key_and_body_give_the_same_set(api, world):
    body = {"template": template(), "count": 50}
    first = post_set(api("bob"), body, HTTP_IDEMPOTENCY_KEY="sweep-1")
    again = post_set(api("bob"), body, HTTP_IDEMPOTENCY_KEY="sweep-1")
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    other = post_set(api("bob"), {**body, "count": 51}, HTTP_IDEMPOTENCY_KEY="sweep-1")
    assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"
    assert TaskSet.objects.count() == 1


def test_a_body_over_the_set_limit_is_a_413_before_it_is_read(api, world, settings):
    settings.TASK_SET_MAX_BYTES = 1000
    response = post_set(api("bob"), {"template": template(), "items": [{"shard": i} for i in range(200)]})
    assert response.status_code == 413 and response.json()["code"] == "request_too_large"
    assert "at most 1000 bytes" in response.json()["message"]
    assert TaskSet.objects.count() == 0


def test_count_or_items_given_as_null_is_refused_as_the_schema_says(api, world):
    for body in ({"template": template(), "items": [{}], "count": None}, {"template": template(), "items": None}):
        response = post_set(api("bob"), body)
        assert response.status_code == 400, body
    assert TaskSet.objects.count() == 0
