"""Reading tasks: visibility, filters, cursor pagination, events paging, cancel/retry permissions."""

from __future__ import annotations

from django.db import transaction

from tasks.models import Task
from tasks.services.lifecycle import event_append, task_lock
from tasks.services.submission import task_submit
from tests.builders import admit, finished, hello_spec


def submit(user, **extra):
    return task_submit(user=user, document=hello_spec(**extra))[0]


def test_members_see_project_tasks_and_outsiders_get_404(api, world):
    task = submit(world.bob)
    for name in ("alice", "bob", "rita"):
        assert api(name).get(f"/api/v1/tasks/{task.pk}").status_code == 200
    response = api("charlie").get(f"/api/v1/tasks/{task.pk}")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert api("charlie").get("/api/v1/tasks").json()["results"] == []
    assert api("alice").get("/api/v1/tasks/not-a-uuid").status_code == 404


def test_it_filters_by_state_cloud_and_project(api, world):
    done = submit(world.bob, name="done")
    Task.objects.filter(pk=done.pk).update(state="SUCCEEDED")
    submit(world.bob, name="waiting")
    submit(world.charlie, name="other project")
    client = api("alice")
    assert [t["name"] for t in client.get("/api/v1/tasks?state=SUCCEEDED").json()["results"]] == ["done"]
    assert len(client.get("/api/v1/tasks?cloud=local").json()["results"]) == 2
    assert client.get("/api/v1/tasks?project=beta").json()["results"] == []
    assert client.get("/api/v1/tasks?state=BOGUS").status_code == 400


def test_it_pages_with_a_cursor_newest_first(api, world):
    names = [submit(world.bob, name=f"t{i}").name for i in range(7)]
    client = api("bob")
    seen, url = [], "/api/v1/tasks?limit=3"
    while url:
        page = client.get(url).json()
        seen += [t["name"] for t in page["results"]]
        url = page["next"]
    assert seen == list(reversed(names))


def test_events_page_with_after_seq_and_limit(api, world):
    task = submit(world.bob)
    with transaction.atomic():
        locked = task_lock(task.pk)
        for i in range(6):
            event_append(task=locked, type="progress", message=f"step {i}")
    client = api("bob")
    seqs, after = [], 0
    while True:
        page = client.get(f"/api/v1/tasks/{task.pk}/events?after_seq={after}&limit=3").json()
        seqs += [e["seq"] for e in page["events"]]
        after = page["next_after_seq"]
        if not page["has_more"]:
            break
    assert seqs == list(range(1, 8))
    assert client.get(f"/api/v1/tasks/{task.pk}/events?after_seq=7").json() == {
        "events": [],
        "next_after_seq": 7,
        "has_more": False,
    }
    assert client.get(f"/api/v1/tasks/{task.pk}/events?limit=0").status_code == 400


def test_cancel_of_a_pending_task_ends_it_at_once(api, world):
    task = submit(world.bob)
    response = api("bob").post(f"/api/v1/tasks/{task.pk}/cancel")
    assert response.status_code == 202 and response.json()["state"] == "CANCELLED"
    again = api("bob").post(f"/api/v1/tasks/{task.pk}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "task_finished"


def test_a_reader_may_not_cancel_and_an_outsider_gets_404(api, world):
    task = submit(world.bob)
    response = api("rita").post(f"/api/v1/tasks/{task.pk}/cancel")
    assert response.status_code == 403 and "reader" in response.json()["message"]
    assert api("charlie").post(f"/api/v1/tasks/{task.pk}/cancel").status_code == 404
    task.refresh_from_db()
    assert task.state == "PENDING"


def test_a_submitter_acts_on_own_tasks_and_a_project_admin_on_all(api, world):
    alices = submit(world.alice)
    assert api("bob").post(f"/api/v1/tasks/{alices.pk}/cancel").status_code == 403
    bobs = submit(world.bob)
    assert api("alice").post(f"/api/v1/tasks/{bobs.pk}/cancel").status_code == 202


def test_retry_needs_a_finished_task_and_readmits_it(api, world):
    waiting = submit(world.bob)
    response = api("bob").post(f"/api/v1/tasks/{waiting.pk}/retry")
    assert response.status_code == 409 and response.json()["code"] == "task_not_finished"
    task = finished(world.bob, exit_code=3, log=b"first try\n")  # attempt 1 ran and failed
    response = api("bob").post(f"/api/v1/tasks/{task.pk}/retry")
    assert response.status_code == 202 and response.json()["state"] == "PENDING"
    second = admit(task)
    assert second.number == 2
    attempts = api("bob").get(f"/api/v1/tasks/{task.pk}/attempts").json()["attempts"]
    assert [(a["number"], a["exit_code"]) for a in attempts] == [(1, 3), (2, None)]
    assert attempts[0]["external_name"] != attempts[1]["external_name"]
    # The first attempt's log and the task's history stay: the retry adds, it does not reset.
    first_log = api("bob").get(f"/api/v1/tasks/{task.pk}/logs?attempt=1").json()
    assert (first_log["attempt"], first_log["data"]) == (1, "first try\n")
    states = [e["data"].get("to") for e in api("bob").get(f"/api/v1/tasks/{task.pk}/events").json()["events"]]
    states = [s for s in states if s]
    assert states[-3:] == ["FAILED", "PENDING", "SUBMITTING"] and "RUNNING" in states[:-3]


def test_the_schema_and_docs_are_served_without_a_cdn(client, world):
    client.force_login(world.alice)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/tasks" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower() and b"/static/drf_spectacular_sidecar/" in docs.content


def test_the_session_works_for_the_api(client, world):
    client.force_login(world.bob)
    assert client.get("/api/v1/tasks").status_code == 200
    assert client.get("/api/v1/clouds").json()[0]["cloud_id"] == "local"


def test_the_list_shows_each_waiting_tasks_queue_place_in_a_constant_number_of_queries(
    api, world, django_assert_max_num_queries
):
    for i in range(3):
        submit(world.bob, name=f"w{i}")
    done = submit(world.bob, name="done")
    Task.objects.filter(pk=done.pk).update(state="SUCCEEDED")
    client = api("bob")
    client.get("/api/v1/tasks")
    with django_assert_max_num_queries(6):  # token, memberships, the page: not one COUNT per waiting task
        rows = client.get("/api/v1/tasks").json()["results"]
    assert {t["name"]: t["queue_position"] for t in rows} == {"w0": 1, "w1": 2, "w2": 3, "done": None}
    for i in range(3, 12):
        submit(world.bob, name=f"w{i}")
    with django_assert_max_num_queries(6):
        rows = client.get("/api/v1/tasks").json()["results"]
    assert [t["queue_position"] for t in rows if t["name"].startswith("w")] == list(range(12, 0, -1))
    assert client.get("/api/v1/tasks?owner=bob&project=alpha&cloud=local").json()["results"][0]["name"] == "w11"
    assert client.get("/api/v1/tasks?owner=nobody").json()["results"] == []


def test_a_read_and_a_submit_answer_exactly_what_the_task_serializer_gives(api, world):
    """The one-task answers are written by hand for speed (task_representation); the shape is TaskSerializer's."""
    from rest_framework.test import APIRequestFactory

    from tasks.api.serializers import TaskSerializer
    from tasks.selectors import task_get_for_user

    ended = finished(world.bob, exit_code=3, name="ended")  # every date and the result set
    submit(world.bob, name="first")  # so the next one waits at place 2
    posted = api("bob").post("/api/v1/tasks", data=hello_spec(name="second", retry_limit=2), format="json")
    assert posted.status_code == 201, posted.json()
    task_id = posted.json()["id"]
    for pk in (task_id, ended.pk):
        read = api("alice").get(f"/api/v1/tasks/{pk}")
        assert read.status_code == 200
        request = APIRequestFactory().get(f"/api/v1/tasks/{pk}", HTTP_HOST="testserver")
        expected = TaskSerializer(task_get_for_user(user=world.alice, task_id=pk), context={"request": request}).data
        assert read.json() == dict(expected)
        assert list(read.json()) == list(expected)  # the same keys in the same order
    assert posted.json() == api("bob").get(f"/api/v1/tasks/{task_id}").json()
    assert posted.json()["queue_position"] == 2
