"""Cancel a set (nothing starts after the answer) and retry its failed elements (new attempts, history kept)."""

from __future__ import annotations

from tasks.models import Attempt, Task
from tasksets.models import SetElement
from tests.tasksets.helpers import URL, materialize, post_set, run_open_elements, template


def test_cancel_ends_every_made_element_and_makes_no_more(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 6, "max_running": 3}).json()
    materialize()
    first = Task.objects.get(set_element__index=0)
    run_open_elements()  # elements 0-2 ran and succeeded
    materialize()  # elements 3-5 made, PENDING
    from tasks.services.admission import connection_admit

    connection_admit(connection_id=world.local.pk)  # … and admitted: their attempts are handed out to no one yet
    response = api("bob").post(f"{URL}/{created['id']}/cancel")
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["state"] == "CANCELLED" and body["finished_at"]
    assert body["counts"]["succeeded"] == 3 and body["counts"]["waiting"] == 0
    after = {e.index: e.task.state for e in SetElement.objects.select_related("task")}
    assert after[0] == "SUCCEEDED" and all(after[i] in ("CANCELLED", "CANCELLING") for i in (3, 4, 5)), after
    assert materialize() == 0 and Task.objects.count() == 6  # nothing is made after the cancel
    # The admitted ones' attempts are closed or told to stop: no host agent's sync hands them out any more.
    handable = Attempt.objects.filter(task__set_element__index__gte=3, closed_at__isnull=True)
    assert handable.filter(stop_requested_at__isnull=True).count() == 0
    assert not Attempt.objects.filter(task__set_element__index__gte=3, program_started_at__isnull=False).exists()
    assert first.events.filter(type="state").last().data["to"] == "SUCCEEDED"


def test_cancel_before_any_element_was_made_counts_them_all_cancelled(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 100_000}).json()
    body = api("bob").post(f"{URL}/{created['id']}/cancel").json()
    assert body["counts"]["cancelled"] == 100_000 and body["counts"]["waiting"] == 0
    assert materialize() == 0 and Task.objects.count() == 0
    again = api("bob").post(f"{URL}/{created['id']}/cancel")
    assert again.status_code == 202 and again.json()["state"] == "CANCELLED"  # idempotent


def test_a_finished_set_cannot_be_cancelled(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 1}).json()
    materialize()
    run_open_elements()
    materialize()
    response = api("bob").post(f"{URL}/{created['id']}/cancel")
    assert response.status_code == 409 and response.json()["code"] == "set_finished"


def test_who_may_cancel_is_who_may_cancel_a_task(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 2}).json()
    assert api("rita").post(f"{URL}/{created['id']}/cancel").status_code == 403  # a reader of alpha
    assert api("charlie").post(f"{URL}/{created['id']}/cancel").status_code == 404  # beta: cannot even see it
    assert api("alice").post(f"{URL}/{created['id']}/cancel").status_code == 202  # alpha's admin


def test_retry_failed_gives_only_the_failed_elements_a_new_attempt(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 4}).json()
    materialize()
    run_open_elements(exit_codes={1: 3, 2: 1})
    materialize()
    assert api("bob").get(f"{URL}/{created['id']}").json()["state"] == "FINISHED"
    response = api("bob").post(f"{URL}/{created['id']}/retry-failed")
    assert response.status_code == 202, response.json()
    assert response.json()["retrying"] == 2 and response.json()["set"]["state"] == "ACTIVE"
    materialize()
    states = {e.index: (e.task.state, e.task.attempts_count) for e in SetElement.objects.select_related("task")}
    assert states == {0: ("SUCCEEDED", 1), 1: ("PENDING", 1), 2: ("PENDING", 1), 3: ("SUCCEEDED", 1)}
    run_open_elements()
    materialize()
    states = {e.index: (e.task.state, e.task.attempts_count) for e in SetElement.objects.select_related("task")}
    assert states == {0: ("SUCCEEDED", 1), 1: ("SUCCEEDED", 2), 2: ("SUCCEEDED", 2), 3: ("SUCCEEDED", 1)}
    assert Attempt.objects.filter(task__set_element__index=1).count() == 2  # the failed attempt is kept
    got = api("bob").get(f"{URL}/{created['id']}").json()
    assert got["state"] == "FINISHED" and got["counts"]["succeeded"] == 4


def test_retries_wait_for_room_under_the_throttle(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 3, "max_running": 3}).json()
    materialize()
    run_open_elements(exit_codes={0: 1, 1: 1, 2: 1})
    api("bob").post(f"{URL}/{created['id']}/retry-failed")
    from tasksets.models import TaskSet

    TaskSet.objects.filter(pk=created["id"]).update(max_running=1)
    assert materialize() == 1  # one retried now, the other two when it ends
    assert Task.objects.filter(state="PENDING").count() == 1


def test_retry_failed_with_nothing_failed_is_a_conflict(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 1}).json()
    materialize()
    run_open_elements()
    response = api("bob").post(f"{URL}/{created['id']}/retry-failed")
    assert response.status_code == 409 and response.json()["code"] == "nothing_failed"


def test_who_may_cancel_a_set_is_decided_as_for_a_task_in_the_same_words(api, world):
    bobs = post_set(api("bob"), {"template": template(), "count": 2}).json()
    alices = post_set(api("alice"), {"template": template(), "count": 2}).json()
    refused = api("rita").post(f"{URL}/{bobs['id']}/cancel")
    assert (refused.status_code, refused.json()["message"]) == (
        403,
        "your role in alpha is reader; cancel and retry need submitter or admin",
    )
    refused = api("bob").post(f"{URL}/{alices['id']}/cancel")
    assert (refused.status_code, refused.json()["message"]) == (
        403,
        "your role in alpha (submitter) does not allow this on another user's task set",
    )
    assert api("alice").post(f"{URL}/{bobs['id']}/cancel").status_code == 202  # a project admin acts on any set
    assert api("bob").post(f"{URL}/{alices['id']}/retry-failed").status_code == 403
