"""Admission is first in, first admitted within a project, never across projects."""

from __future__ import annotations

from cloudpivot.accounts.models import Quota
from tasks.models import Task
from tasks.services.admission import admit_all, queue_heads
from tasks.services.submission import task_submit
from tests.builders import hello_spec


def test_a_project_held_by_its_own_quota_never_blocks_another_projects_tasks(world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=1)
    alphas = [task_submit(user=world.bob, document=hello_spec(name=f"a{i}"))[0] for i in range(151)]
    assert admit_all() == 1
    assert Task.objects.get(pk=alphas[0].pk).state == "SUBMITTING"  # the oldest of alpha went first
    assert Task.objects.filter(state="PENDING").count() == 150
    betas = task_submit(user=world.charlie, document=hello_spec(name="b"))[0]
    assert admit_all() == 1
    assert Task.objects.get(pk=betas.pk).state == "SUBMITTING"
    assert Task.objects.filter(project=world.alpha, state="PENDING").count() == 150
    assert Task.objects.get(pk=alphas[1].pk).state_reason == "waiting: project alpha quota on local: 1/1 tasks in use"


def test_the_queue_heads_take_one_query_per_project_however_long_the_queues(world, django_assert_num_queries):
    for i in range(30):
        task_submit(user=world.bob if i % 2 else world.charlie, document=hello_spec(name=f"t{i}"))
    with django_assert_num_queries(3):  # the projects with pending tasks, then alpha's and beta's oldest
        heads = queue_heads(world.local, limit=5)
    assert [task.name for task in heads] == ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]
