"""Admission is first in, first admitted within a project, never across projects."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from cloudpivot.accounts.models import Membership, Quota, Role
from tasks.models import Task
from tasks.services.admission import admit_all, connection_admit, queue_heads
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import hello_spec, submit
from tests.helpers import wait_for


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


@pytest.mark.skipif(
    connection.vendor == "postgresql",
    reason="PostgreSQL picks among the indexes by the table's statistics, which the suite's earlier tests change "
    "(a CI run chose another index for four rows); its plans on a seeded table are in docs/benchmarks.md",
)
def test_the_queue_heads_are_read_from_the_index_of_pending_tasks(world):
    """tasks_task_pending_heads (PENDING rows only: connection, project, owner, created_at, id) serves both reads:
    the pairs, and each pair's oldest in order, however many PENDING tasks of other owners share its project."""
    for i in range(4):
        submit(world.bob if i % 2 else world.alice, name=f"t{i}")
    pending = Task.objects.filter(connection=world.local, state="PENDING")
    pairs = pending.order_by().values_list("project_id", "owner_id").distinct()
    oldest = pending.filter(project_id=world.alpha.pk, owner_id=world.bob.pk).order_by("created_at", "id")[:5]
    for query in (pairs, oldest):
        assert "tasks_task_pending_heads" in query.explain(), query.explain()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks and deferred foreign keys: PostgreSQL")
def test_admission_and_a_commit_that_checks_a_foreign_key_to_the_project_never_deadlock(world):
    """Found by the soak (tests/soak): a cancel holds the task row and inserts a row referencing the project (its
    feed entry); the foreign key is checked at COMMIT with FOR KEY SHARE on the project row. Admission held the
    project FOR UPDATE and waited for the task row: deadlock, a 500 on the cancel. FOR NO KEY UPDATE serializes
    admissions just as well and lets the key check through."""
    task = submit(world.bob)
    errors: list[BaseException] = []
    admitted: list[int] = []

    def admission() -> None:
        try:
            admitted.append(connection_admit(connection_id=task.connection_id))
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=admission)
    with transaction.atomic():
        task_lock(task.pk)
        Membership.objects.create(project=world.alpha, user=world.charlie, role=Role.READER)  # a key to alpha
        thread.start()
        with connections["default"].cursor() as cursor:  # until admission waits for our task row

            def admission_waits() -> bool:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
                return cursor.fetchone()[0] > 0

            wait_for(admission_waits, what="admission to wait for the task row")
    thread.join(30)
    assert not errors, errors
    assert admitted == [1]
