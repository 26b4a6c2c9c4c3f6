"""The dashboard's quota card: each quota of the user's projects, with what is in use against each limit."""

from __future__ import annotations

import pytest

from cloudpivot.accounts.models import Quota
from tests.builders import instance_row, running, submit

pytestmark = pytest.mark.django_db


def bars(response, project: str, scope: str) -> dict[str, tuple[str, str, int]]:
    card = next(c for c in response.context["quotas"] if (c.project, c.scope) == (project, scope))
    return {bar.label: (bar.used, bar.limit, bar.percent) for bar in card.bars}


def test_the_card_shows_use_against_each_limit_that_is_set(pages, world):
    Quota.objects.create(project=world.alpha, max_tasks=4, max_vcpu=8, max_memory_mb=2048, max_instances=2)
    Quota.objects.create(project=world.alpha, connection=world.local, max_gpus=0)
    running(world.bob, resources={"cpu": 2, "memory_mb": 512})
    running(world.alice, resources={"cpu": 0.5})
    submit(world.bob, resources={"cpu": 4})  # waiting: holds nothing yet
    instance_row(
        connection=world.local, project=world.alpha, owner=world.bob, vcpus=2, memory_mb=1024, status="Running"
    )
    response = pages("rita").get("/")
    assert bars(response, "alpha", "all clouds") == {
        "Tasks": ("2", "4", 50),
        # Tasks and instances share the vCPU and memory limits: 2.5 + 2 vCPU, 512 + 1024 MB.
        "vCPU (tasks and instances)": ("4.5", "8", 56),
        "Memory (tasks and instances)": ("1536", "2048", 75),
        "Instances": ("1", "2", 50),
    }
    assert bars(response, "alpha", "local") == {"GPUs": ("0", "0", 100)}  # a limit of 0 is full
    content = response.content.decode()
    assert "No quotas set" not in content
    assert 'aria-label="alpha vCPU (tasks and instances): 4.5 of 8"' in content and "1536 / 2048 MB" in content
    assert 'class="quota-row full"' in content  # the GPU limit of 0


def test_the_card_shows_only_my_projects_quotas(pages, world):
    Quota.objects.create(project=world.alpha, max_tasks=4)
    Quota.objects.create(project=world.beta, max_tasks=1)
    assert [(c.project, c.scope) for c in pages("charlie").get("/").context["quotas"]] == [("beta", "all clouds")]
    assert [c.project for c in pages("bob").get("/").context["quotas"]] == ["alpha"]


def test_a_quota_with_no_limit_set_makes_no_card(pages, world):
    Quota.objects.create(project=world.alpha, snapshot_retention_days=7)
    response = pages("bob").get("/")
    assert response.context["quotas"] == [] and b"No quotas set for your projects" in response.content


def test_my_projects_without_limits_show_their_use_without_bars(pages, world):
    """The card used to say only "No quotas set" when no limit was set, however much a project held."""
    Quota.objects.create(project=world.beta, snapshot_retention_days=7)  # no limit the bars know: still unlimited
    running(world.bob, resources={"cpu": 2, "memory_mb": 512})
    instance_row(
        connection=world.local, project=world.alpha, owner=world.bob, vcpus=2, memory_mb=1024, status="Running"
    )
    response = pages("bob").get("/")
    [card] = response.context["usage"]
    assert (card.project, card.scope, card.limited) == ("alpha", "all clouds", False)
    assert {bar.label: (bar.used, bar.limit) for bar in card.bars} == {
        "Tasks": ("1", ""),
        "vCPU (tasks and instances)": ("4", ""),
        "Memory (tasks and instances)": ("1536", ""),
        "GPUs": ("0", ""),
        "Instances": ("1", ""),
    }
    content = response.content.decode()
    assert 'data-quota="alpha:all clouds" data-unlimited' in content and "1536 MB in use" in content
    assert [c.project for c in pages("charlie").get("/").context["usage"]] == ["beta"]


def test_a_project_with_a_limit_shows_its_bars_not_a_usage_card(pages, world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=2)
    response = pages("bob").get("/")
    assert [c.project for c in response.context["quotas"]] == ["alpha"] and response.context["usage"] == []
