"""Usage accounting and budgets (issue 15, item 11): hours read from attempts and instances, the API and its
CSV, the 80 % / 100 % feed entries, and the hard stop that holds admissions."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from django.utils import timezone

from notifications.models import FeedEvent
from resources.models import Instance
from tasks.models import Attempt, Task
from tasks.services.admission import connection_admit
from tests.builders import finished, instance_row, ran, submit
from usage.accounting import month_bounds, usage_rows
from usage.budgets import budget_sweep, budget_sweep_one
from usage.models import ProjectBudget

pytestmark = pytest.mark.django_db
UTC = dt.UTC
NOV = dt.datetime(2026, 11, 1, tzinfo=UTC)


def test_hours_are_read_from_attempts_and_instances_and_clipped_to_the_month(world):
    ran(world.bob, began=NOV + dt.timedelta(hours=1), ended=NOV + dt.timedelta(hours=4), cpu=2, memory_mb=2048, gpu=1)
    ran(world.bob, began=NOV - dt.timedelta(hours=1), ended=NOV + dt.timedelta(hours=2), cpu=1)  # began in October
    ran(world.alice, began=NOV + dt.timedelta(days=40), ended=None, cpu=8)  # December: not in November
    vm = instance_row(connection=world.local, project=world.alpha, owner=world.alice, vcpus=4, memory_mb=8192)
    Instance.objects.filter(pk=vm.pk).update(created_at=dt.datetime(2026, 11, 30, 20, tzinfo=UTC))  # 4 h left

    start, end = month_bounds("2026-11")
    rows = usage_rows(start=start, end=end, project_ids=[world.alpha.pk], by=("user", "cloud"))

    assert rows == [
        {
            "project": "*", "user": "alice", "cloud": "local", "core_hours": Decimal("16.00"),
            "gpu_hours": Decimal("0.00"), "memory_gb_hours": Decimal("32.00"), "attempts": 0, "instances": 1,
        },
        {
            "project": "*", "user": "bob", "cloud": "local", "core_hours": Decimal("8.00"),  # 2 × 3 h + 1 × 2 h
            "gpu_hours": Decimal("3.00"), "memory_gb_hours": Decimal("6.00"), "attempts": 2, "instances": 0,
        },
    ]  # fmt: skip
    assert usage_rows(start=start, end=end, project_ids=[world.beta.pk]) == []


def test_a_month_is_written_yyyy_mm():
    assert month_bounds("2026-12") == (dt.datetime(2026, 12, 1, tzinfo=UTC), dt.datetime(2027, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="write it as YYYY-MM"):
        month_bounds("2026-13")


def test_the_api_answers_rows_of_the_callers_projects_and_the_same_as_csv(world, api):
    ran(world.bob, began=NOV + dt.timedelta(hours=1), ended=NOV + dt.timedelta(hours=3), cpu=1.5)
    answer = api("bob").get("/api/v1/usage?month=2026-11")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["month"] == "2026-11"
    assert [(r["project"], r["user"], r["cloud"], r["core_hours"]) for r in body["results"]] == [
        ("alpha", "bob", "local", "3.00")
    ]
    assert api("charlie").get("/api/v1/usage?month=2026-11").json()["results"] == []  # beta only
    assert api("charlie").get("/api/v1/usage?month=2026-11&project=alpha").json()["results"] == []  # not charlie's
    per_project = api("bob").get("/api/v1/usage?month=2026-11&by=project").json()["results"]
    assert [(r["project"], r["user"], r["core_hours"]) for r in per_project] == [("alpha", "*", "3.00")]

    exported = api("bob").get("/api/v1/usage/export?month=2026-11&project=alpha")
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(exported.content.decode())))
    assert rows[0] == ["month", "project", "user", "cloud", "core_hours", "gpu_hours", "memory_gb_hours",
                       "attempts", "instances"]  # fmt: skip
    assert rows[1] == ["2026-11", "alpha", "bob", "local", "3.00", "0.00", "0.00", "1", "0"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("month=2026-13", "month"),
        ("month=last", "month"),
        ("month=1999-12", "month"),
        ("by=colour", "by"),
    ],
)
def test_bad_usage_queries_name_the_field(world, api, query, field):
    answer = api("bob").get(f"/api/v1/usage?{query}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["errors"][0]["field"] == field


def test_a_spent_budget_with_a_hard_stop_holds_admission_until_it_is_raised(world, api):
    now = timezone.now()
    ran(world.bob, began=now - dt.timedelta(seconds=60), ended=now, cpu=120)  # 2 core-hours this month
    budget = ProjectBudget.objects.create(project=world.alpha, core_hours=Decimal("1.5"), hard_stop=True)
    assert api("bob").get("/api/v1/projects/beta/budget").status_code == 404  # not bob's project

    assert budget_sweep() == "1 budgets read, 1 holds changed"
    assert budget_sweep() == "1 budgets read, 0 holds changed"  # and no second feed entry
    entries = FeedEvent.objects.filter(project=world.alpha, type__startswith="project.budget")
    assert sorted(entries.values_list("type", flat=True)) == ["project.budget_exhausted", "project.budget_warning"]
    assert "has used 2.00 of its 1.50 core-hour budget" in entries.get(type="project.budget_warning").message

    waiting = submit(world.bob, name="after the budget")
    connection_admit(connection_id=world.local.pk)
    waiting.refresh_from_db()
    assert waiting.state == "PENDING"
    assert waiting.state_reason.startswith("waiting: project alpha has used 2.00 of its 1.50 core-hour budget")
    other = submit(world.charlie, name="beta has no budget")
    connection_admit(connection_id=world.local.pk)
    assert Task.objects.get(pk=other.pk).state != "PENDING"

    shown = api("bob").get("/api/v1/projects/alpha/budget").json()
    assert (shown["state"], shown["percent"], shown["remaining_core_hours"]) == ("exhausted", "133.3", "0.00")
    assert shown["held_reason"] == waiting.state_reason
    assert shown["burn"][-1]["used_core_hours"] == "2.00"

    budget.refresh_from_db()
    budget.core_hours = Decimal(10)
    budget.save()
    assert budget_sweep_one(budget) is True  # the hold is lifted
    connection_admit(connection_id=world.local.pk)
    assert Task.objects.get(pk=waiting.pk).state != "PENDING"


def test_without_a_hard_stop_a_spent_budget_warns_and_holds_nothing(world):
    now = timezone.now()
    ran(world.bob, began=now - dt.timedelta(seconds=60), ended=now, cpu=60)  # 1 core-hour
    budget = ProjectBudget.objects.create(project=world.alpha, core_hours=Decimal("1.2"))
    budget_sweep_one(budget)
    assert list(FeedEvent.objects.filter(type__startswith="project.budget").values_list("type", flat=True)) == [
        "project.budget_warning"
    ]
    assert ProjectBudget.objects.get(pk=budget.pk).held_reason == ""


def test_each_attempt_is_priced_at_the_spec_it_ran_with_and_a_debug_hold_until_it_ends(world):
    """A retry with changes made attempt 2 ask for 4 cores (attempt 1 had 1); attempt 2 failed and its pod
    was kept for debugging 2 h more: it held its 4 cores until the hold's end."""
    from tasks.models import TaskEvent

    task = finished(world.bob, exit_code=3, retry_limit=1)  # attempt 1 failed; a retry is due
    Task.objects.filter(pk=task.pk).update(
        attempts_count=2, normalized=task.normalized | {"resources": {"cpu": 4, "memory_mb": 0, "gpu": 0}}
    )
    first = Attempt.objects.get(task=task)
    Attempt.objects.filter(pk=first.pk).update(
        program_started_at=NOV + dt.timedelta(hours=1), finished_at=NOV + dt.timedelta(hours=2)
    )
    Attempt.objects.create(
        task=task, number=2, external_name=f"cp-{task.pk.hex}-2", runner_token_hash="h2", credential_nonce="n2",
        program_started_at=NOV + dt.timedelta(hours=3), finished_at=NOV + dt.timedelta(hours=4),
        hold_until=NOV + dt.timedelta(hours=6),
    )  # fmt: skip
    before = (task.normalized.get("resources") or {}).get("cpu", 1)
    TaskEvent.objects.create(
        task=task, seq=99, type="spec_changed", message="retry with changes",
        data={"attempt": 2, "changes": [{"field": "resources.cpu", "from": before, "to": 4}]},
    )  # fmt: skip
    start, end = month_bounds("2026-11")
    (row,) = usage_rows(start=start, end=end, project_ids=[world.alpha.pk])
    # attempt 1: 1 h × its own cores; attempt 2: (1 h ran + 2 h held) × 4 cores
    assert row["core_hours"] == Decimal(before) * 1 + 4 * 3
    assert row["attempts"] == 2


def test_a_spec_change_of_a_task_outside_the_window_changes_nothing_in_it(world):
    """Each attempt in the window is priced at the spec it ran with; a changed task that held nothing in the
    month adds nothing (the window's tasks are picked out of every `spec_changed` event: see
    usage.accounting._specs_of_changed_tasks for why not with a subquery)."""
    from tasks.models import TaskEvent
    from usage.accounting import spans

    inside = ran(world.bob, began=NOV + dt.timedelta(hours=1), ended=NOV + dt.timedelta(hours=2), cpu=1)
    outside = ran(world.bob, began=NOV - dt.timedelta(days=40), ended=NOV - dt.timedelta(days=39), cpu=1)
    for task in (inside, outside):
        Task.objects.filter(pk=task.pk).update(attempts_count=2)
        Attempt.objects.create(
            task=task, number=2, external_name=f"cp-{task.pk.hex}-2", runner_token_hash=f"h-{task.pk.hex}",
            credential_nonce="n2", program_started_at=task.attempts.get().program_started_at + dt.timedelta(minutes=30),
            finished_at=task.attempts.get().finished_at,
        )  # fmt: skip
        TaskEvent.objects.create(
            task=task, seq=99, type="spec_changed", message="retry with changes",
            data={"attempt": 2, "changes": [{"field": "resources.cpu", "from": 3, "to": 1}]},
        )  # fmt: skip
    start, end = month_bounds("2026-11")
    found = spans(start=start, end=end)
    # attempt 1 at the 3 cores it ran with (1 h), attempt 2 at 1 core (30 min); nothing of `outside`
    assert sorted((span.vcpu, span.ended - span.began) for span in found) == [
        (Decimal(1), dt.timedelta(minutes=30)),
        (Decimal(3), dt.timedelta(hours=1)),
    ]
