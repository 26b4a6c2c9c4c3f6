"""Compare attempts and retry with the suggested change (issue 15, item 8), and each attempt's phases (item 9).

The mapping failure class → suggestion is checked on plain attempts; the rest goes through the services
and the API on the local cloud (the Runner's reports made by tests/builders.py). The Kubernetes path
(OOMKilled from the pod's container status) is in tests/clusters/test_kubernetes_suggestions.py.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from tasks.choices import AttemptState, StopReason
from tasks.models import Attempt, Task
from tasks.phases import attempt_phases, phase_stats
from tasks.services import task_retry
from tasks.services.reconcile import timeouts_due
from tasks.services.spec_changes import spec_differences, specs_by_attempt
from tasks.services.suggestions import failure_class, suggestion_for
from tests.builders import admit, finished, report, running


# ---------------------------------------------------------------------------- the mapping
@pytest.mark.parametrize(
    ("fields", "spec", "kind", "field", "suggested"),
    [
        (
            {"failure_reason": "OOMKilled: the container ran out of memory (limit of 64Mi) and was killed"},
            {"resources": {"memory_mb": 64}},
            "oom_killed",
            "resources.memory_mb",
            128,
        ),
        ({"failure_reason": "OOMKilled: out of memory"}, {"resources": {}}, "oom_killed", "resources.memory_mb", 1024),
        ({"failure_reason": "OOMKilled"}, {"resources": {"memory_mb": 100}}, "oom_killed", "resources.memory_mb", 256),
        ({"stop_reason": StopReason.TIMEOUT}, {"timeout_seconds": 30}, "deadline", "timeout_seconds", 60),
        (
            {"failure_reason": "the Job ran past its deadline of 30 s and Kubernetes stopped it (DeadlineExceeded)"},
            {"timeout_seconds": 30},
            "deadline",
            "timeout_seconds",
            60,
        ),
        (
            {"failure_reason": "the image registry.example/nope:1 cannot be pulled (ImagePullBackOff: Back-off)"},
            {"image": "registry.example/nope:1"},
            "image_pull",
            "image",
            "registry.example/nope:1",
        ),
        (
            {"failure_reason": "the server went to ERROR: No valid host was found. There are not enough hosts"},
            {"resources": {"cpu": 4, "memory_mb": 8192}},
            "no_valid_host",
            None,
            None,
        ),
        ({"start_error": "Quota exceeded for cores: Requested 4, but already used 8 of 8"}, {}, "quota", None, None),
    ],
    ids=["oom", "oom-no-limit", "oom-rounds-up", "timeout", "k8s-deadline", "image-pull", "no-valid-host", "quota"],
)
def test_each_known_failure_class_gets_its_suggestion(fields, spec, kind, field, suggested):
    attempt = Attempt(state=AttemptState.FINISHED, **fields)
    assert failure_class(attempt) == kind
    suggestion = suggestion_for(attempt, spec)
    assert suggestion["failure_class"] == kind
    assert suggestion["field"] == field
    assert suggestion["suggested"] == suggested
    assert suggestion["why"]


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"exit_code": 3, "failure_reason": "the program exited with code 3"}, "exit_code"),
        ({"exit_code": 0}, ""),
        ({"stop_reason": StopReason.CANCEL, "exit_signal": 15}, "cancelled"),
        ({"state": AttemptState.LOST, "failure_reason": "the pod vanished"}, "lost"),
    ],
)
def test_other_outcomes_have_a_class_but_no_suggestion(fields, kind):
    attempt = Attempt(**{"state": AttemptState.FINISHED, **fields})
    assert failure_class(attempt) == kind
    assert suggestion_for(attempt, {}) is None


def test_spec_differences_name_each_changed_leaf():
    before = {"image": "a", "resources": {"memory_mb": 64, "gpu": 0}, "env": {"X": "1"}}
    after = {"image": "a", "resources": {"memory_mb": 128, "gpu": 0}, "env": {}, "timeout_seconds": 5}
    assert spec_differences(before, after) == [
        {"field": "env", "from": None, "to": {}},
        {"field": "env.X", "from": "1", "to": None},
        {"field": "resources.memory_mb", "from": 64, "to": 128},
        {"field": "timeout_seconds", "from": None, "to": 5},
    ]


# ---------------------------------------------------------------------------- retry with changes
def timed_out(user, timeout: int = 5) -> Task:
    """A local task stopped at its timeout, as the ticker and the Runner do it."""
    task, attempt = running(user, timeout_seconds=timeout)
    assert timeouts_due(now=timezone.now() + dt.timedelta(seconds=timeout + 1)) == 1
    report(attempt, {"type": "exited", "data": {"signal": 15}})
    task.refresh_from_db()
    assert task.state == "TIMED_OUT", task.state_reason
    return task


def test_the_api_offers_the_suggestion_and_a_retry_with_it_runs_the_changed_spec(world, api):
    task = timed_out(world.bob)
    client = api("bob")
    body = client.get(f"/api/v1/tasks/{task.pk}/attempts").json()
    assert body["attempts"][0]["failure_class"] == "deadline"
    suggestion = body["suggestion"]
    assert suggestion == body["attempts"][0]["suggestion"]
    assert (suggestion["field"], suggestion["current"], suggestion["suggested"]) == ("timeout_seconds", 5, 10)

    answer = client.post(
        f"/api/v1/tasks/{task.pk}/retry", {"changes": {suggestion["field"]: suggestion["suggested"]}}, format="json"
    )
    assert answer.status_code == 202, answer.content
    assert answer.json()["spec"]["timeout_seconds"] == 10
    assert answer.json()["timeout_seconds"] == 10
    event = task.events.get(type="spec_changed")
    assert event.data["attempt"] == 2
    assert event.data["changes"] == [{"field": "timeout_seconds", "from": 5, "to": 10}]

    attempt = admit(Task.objects.get(pk=task.pk))
    assert attempt.number == 2
    task.refresh_from_db()
    assert specs_by_attempt(task)[1]["timeout_seconds"] == 5
    assert specs_by_attempt(task)[2]["timeout_seconds"] == 10
    compare = client.get(f"/api/v1/tasks/{task.pk}/attempts/compare?a=1&b=2").json()
    assert compare["spec_differences"] == [{"field": "timeout_seconds", "a": 5, "b": 10}]
    assert compare["a"]["failure_class"] == "deadline"
    assert compare["a"]["spec"]["timeout_seconds"] == 5
    assert [p["phase"] for p in compare["a"]["phases"]][:2] == ["queued", "admitted"]
    assert compare["b"]["number"] == 2 and compare["b"]["failure_class"] == ""


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"resources.memory_mb": -5}, "resources.memory_mb"),
        ({"timeout_seconds": "soon"}, "timeout_seconds"),
        ({"comand": ["x"]}, "comand"),
        ({"cloud": "elsewhere"}, "cloud"),
        ({"command.0": "x"}, "command.0"),
        ({}, "changes"),
    ],
)
def test_a_bad_change_is_a_400_naming_the_field_and_changes_nothing(world, api, changes, field):
    task = finished(world.bob, exit_code=1)
    answer = api("bob").post(f"/api/v1/tasks/{task.pk}/retry", {"changes": changes}, format="json")
    assert answer.status_code == 400, answer.content
    assert field in [error["field"] for error in answer.json()["errors"]]
    task.refresh_from_db()
    assert task.state == "FAILED" and not task.events.filter(type="spec_changed").exists()


def test_a_change_is_refused_like_a_retry_before_it_is_checked(world, api):
    task, _attempt = running(world.bob)
    answer = api("bob").post(f"/api/v1/tasks/{task.pk}/retry", {"changes": {"resources.memory_mb": -1}}, format="json")
    assert answer.status_code == 409  # not retryable: the state is said before the value
    rita = api("rita").post(f"/api/v1/tasks/{task.pk}/retry", {"changes": {"timeout_seconds": 9}}, format="json")
    assert rita.status_code == 403


def test_a_retry_without_a_body_still_works_and_a_body_not_an_object_is_refused(world, api):
    task = finished(world.bob, exit_code=1)
    refused = api("bob").post(f"/api/v1/tasks/{task.pk}/retry", [1, 2], format="json")
    assert refused.status_code == 400
    answer = api("bob").post(f"/api/v1/tasks/{task.pk}/retry")
    assert answer.status_code == 202
    assert answer.json()["state"] == "PENDING"


def test_compare_names_a_missing_attempt(world, api):
    task = finished(world.bob, exit_code=1)
    huge = api("bob").get(f"/api/v1/tasks/{task.pk}/attempts/compare?a=9223372036854775808")
    assert huge.status_code == 400 and huge.json()["errors"][0]["field"] == "a"
    answer = api("bob").get(f"/api/v1/tasks/{task.pk}/attempts/compare?a=1&b=7")
    assert answer.status_code == 404
    assert answer.json()["errors"][0]["field"] == "b"
    one = api("bob").get(f"/api/v1/tasks/{task.pk}/attempts/compare").json()
    assert one["a"]["number"] == one["b"]["number"] == 1
    assert one["a"]["last_log_lines"] == ["hello"]
    assert one["spec_differences"] == []


def test_the_service_takes_changes_and_records_them(world):
    task = finished(world.bob, exit_code=1, resources={"memory_mb": 64})
    task_retry(task_id=task.pk, user=world.bob, changes={"resources.memory_mb": 128, "env.MODE": "big"})
    task.refresh_from_db()
    assert task.normalized["resources"]["memory_mb"] == 128
    assert task.normalized["env"] == {"MODE": "big"}
    assert task.spec["resources"] == {"memory_mb": 64}  # the document as submitted stays


# ---------------------------------------------------------------------------- phases
def test_a_finished_attempt_has_its_phases_in_order_and_the_cloud_its_percentiles(world):
    task = finished(world.bob)
    attempt = task.attempts.get()
    phases = attempt_phases(attempt, task.created_at)
    names = [p["phase"] for p in phases]
    assert names[:2] == ["queued", "admitted"] and names[-1] == "finished"
    assert "runner_contact" in names and "program_started" in names
    assert "booted" not in names  # a local task boots nothing
    assert [p["at"] for p in phases] == sorted(p["at"] for p in phases)
    assert abs(sum(p["percent"] for p in phases) - 100) < 0.1
    stats = phase_stats(Attempt.objects.filter(task__connection=world.local))
    assert [row["phase"] for row in stats][:2] == ["queued", "admitted"]
    assert all(row["count"] == 1 and row["p50"] == row["p95"] for row in stats)


def test_percentiles_over_several_attempts():
    from tasks.phases import _percentile

    values = [float(n) for n in range(1, 101)]
    assert _percentile(values, 50) == 50.0
    assert _percentile(values, 95) == 95.0
    assert _percentile([1.0, 9.0], 95) == 9.0


# ---------------------------------------------------------------------------- pages
def test_the_pages_offer_the_change_to_whoever_may_retry_and_refuse_a_bad_value_on_the_page(world, pages):
    task = timed_out(world.bob)
    detail = pages("bob").get(f"/tasks/{task.pk}/").content.decode()
    assert 'id="retry-suggestion"' in detail and 'value="10"' in detail
    assert 'id="retry-suggestion"' not in pages("rita").get(f"/tasks/{task.pk}/").content.decode()
    assert pages("charlie").get(f"/tasks/{task.pk}/compare/").status_code == 404
    assert pages("bob").get(f"/tasks/{task.pk}/compare/?b=3").status_code == 404
    assert pages("bob").get(f"/tasks/{task.pk}/compare/?a=9223372036854775808").status_code == 404

    answer = pages("bob").post(f"/tasks/{task.pk}/retry/", {"field": "timeout_seconds", "value": "-3"}, follow=True)
    assert "timeout_seconds" in answer.content.decode() and "invalid" in answer.content.decode()
    task.refresh_from_db()
    assert task.state == "TIMED_OUT" and task.timeout_seconds == 5
    pages("bob").post(f"/tasks/{task.pk}/retry/", {"field": "timeout_seconds", "value": "10"})
    task.refresh_from_db()
    assert task.state == "PENDING" and task.timeout_seconds == 10
    assert pages("rita").get(f"/tasks/{task.pk}/compare/").status_code == 200


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("timeout_seconds", "[" * 100_000 + "]" * 100_000, "at most 200 characters and its value 10000"),
        ("timeout_seconds", "[" * 5_000 + "]" * 5_000, "nested too deeply"),
        ("timeout_seconds", "NaN", "timeout_seconds"),
        ("x" * 300, "1", "at most 200 characters"),
    ],
)
def test_the_pages_retry_form_takes_hostile_input_within_limits_never_a_500(world, pages, field, value, words):
    task = timed_out(world.bob)
    answer = pages("bob").post(f"/tasks/{task.pk}/retry/", {"field": field, "value": value}, follow=True)
    assert answer.status_code == 200 and words in answer.content.decode()
    task.refresh_from_db()
    assert task.state == "TIMED_OUT" and task.timeout_seconds == 5
