"""A set runs to its end: elements made as earlier ones end, never more open than max_running, then FINISHED."""

from __future__ import annotations

from tasks.choices import TERMINAL
from tasks.models import Task
from tasksets.models import SetElement
from tasksets.services.materialize import sets_due
from tests.tasksets.helpers import URL, materialize, post_set, run_open_elements, template


def open_elements(set_id) -> int:
    return SetElement.objects.filter(task_set_id=set_id).exclude(task__state__in=TERMINAL).count()


def test_the_throttle_holds_from_the_first_element_to_the_last(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 10, "max_running": 3}).json()
    most_open, passes = 0, 0
    while materialize() or open_elements(created["id"]):
        most_open = max(most_open, open_elements(created["id"]))
        run_open_elements()
        passes += 1
        assert passes < 20, "the set does not finish"
    got = api("bob").get(f"{URL}/{created['id']}").json()
    assert most_open == 3 and passes == 4  # 3 + 3 + 3 + 1
    assert got["state"] == "FINISHED" and got["finished_at"] and got["materialized"] == 10
    assert got["counts"]["succeeded"] == 10 and got["counts"]["waiting"] == 0


def test_without_a_throttle_a_set_keeps_its_pending_window_filled(api, world, settings):
    settings.TASK_SET_AHEAD = 4
    created = post_set(api("bob"), {"template": template(), "count": 9}).json()
    assert materialize() == 4
    run_open_elements()
    assert materialize() == 4 and open_elements(created["id"]) == 4
    run_open_elements()
    assert materialize() == 1
    run_open_elements()
    materialize()
    assert api("bob").get(f"{URL}/{created['id']}").json()["state"] == "FINISHED"
    assert Task.objects.filter(state="SUCCEEDED").count() == 9


def test_the_pass_is_due_while_a_set_has_room_or_has_ended_and_not_while_it_is_full(api, world):
    from django.utils import timezone

    now = timezone.now()
    post_set(api("bob"), {"template": template(), "count": 2, "max_running": 1})
    assert sets_due(now, now) == now  # room: at once
    materialize()
    assert sets_due(now, now) is None  # full: the end of its element rings
    run_open_elements()
    assert sets_due(now, now) == now
    materialize()
    run_open_elements()
    assert sets_due(now, now) == now  # every element ended: the pass marks it finished
    materialize()
    assert sets_due(now, now) is None


def test_an_element_that_cannot_be_made_holds_the_set_with_the_reason(api, world):
    from cloudpivot.accounts.models import Membership

    created = post_set(api("bob"), {"template": template(), "count": 3}).json()
    Membership.objects.filter(user=world.bob).delete()  # bob may no longer submit to alpha
    assert materialize() == 0
    got = api("alice").get(f"{URL}/{created['id']}").json()
    assert got["state"] == "ACTIVE" and got["materialized"] == 0
    assert got["state_reason"].startswith("element 0 cannot be made a task: ")


def test_an_element_that_ends_rings_the_reconcile_pass(api, world, monkeypatch, django_capture_on_commit_callbacks):
    from tasks import dispatch

    rung = []
    post_set(api("bob"), {"template": template(), "count": 1})
    materialize()
    monkeypatch.setattr(dispatch, "wake_reconciler", lambda: rung.append(1))
    with django_capture_on_commit_callbacks(execute=True):
        run_open_elements()
    assert rung, "no ring when an element ended"


def test_the_reconcile_pass_makes_elements_before_it_admits(api, world, monkeypatch):
    from tasks.services import reconcile

    monkeypatch.setattr(reconcile, "agents_launched", lambda: 0)  # no host agent process in this test
    created = post_set(api("bob"), {"template": template(), "count": 5, "max_running": 2}).json()
    done = reconcile.reconcile_pass()
    assert done["set_elements"] == 2 and done["admitted"] == 2
    assert set(Task.objects.values_list("state", flat=True)) == {"SUBMITTING"}
    assert api("bob").get(f"{URL}/{created['id']}").json()["counts"]["submitting"] == 2
