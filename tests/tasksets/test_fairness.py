"""Fair share: a large set never starves another user's task, in its project or another, on either admission path.

Measured in admission passes, not wall time: each pass makes the set's next elements, admits (the reconcile pass,
or a host agent's sync), then the admitted tasks run and end before the next one.
"""

from __future__ import annotations

import pytest

from tasks.models import Attempt, Task
from tasks.services.admission import connection_admit, fair_order
from tasks.services.runner_sync import SyncScope, sync_apply
from tasksets.models import SetElement
from tests.builders import report, submit
from tests.tasksets.helpers import materialize, post_set, template

SET_SIZE = 10_000
SLOTS = 3


def end_admitted() -> int:
    """Every admitted task's program starts and exits 0 (what happens between two passes)."""
    ended = 0
    for task in Task.objects.filter(state__in=("SUBMITTING", "STARTING")):
        attempt = Attempt.objects.get(task=task, number=task.attempts_count)
        report(attempt, {"type": "started", "data": {"pid": 4242}}, {"type": "exited", "data": {"exit_code": 0}})
        ended += 1
    return ended


def reconcile_admission(world) -> None:
    connection_admit(connection_id=world.local.pk)


def agent_admission(world) -> None:
    scope = SyncScope(agent_name="agent-test", connection_ids=[world.local.pk], runs_dirs={world.local.pk: "/runs"})
    sync_apply(scope=scope, agent={"boot_id": "b1", "pid": 1}, known=[], reports=[])


def a_pass(admission, world) -> None:
    materialize()
    admission(world)


@pytest.mark.parametrize("admission", [reconcile_admission, agent_admission], ids=["reconcile", "agent"])
@pytest.mark.parametrize("other", ["alice", "charlie"], ids=["same-project", "other-project"])
def test_a_single_task_beside_a_10000_element_set_takes_the_next_free_slot(api, world, admission, other):
    world.local.max_active_tasks = SLOTS
    world.local.save(update_fields=["max_active_tasks"])
    created = post_set(api("bob"), {"template": template(), "count": SET_SIZE}).json()
    a_pass(admission, world)
    a_pass(admission, world)  # the slots are full of the set's elements, a window of them PENDING behind
    assert Task.objects.filter(state__in=("SUBMITTING", "STARTING")).count() == SLOTS
    assert Task.objects.filter(state="PENDING").count() >= 90
    single = submit(getattr(world, other), name="single")
    passes = 0
    while Task.objects.get(pk=single.pk).state == "PENDING":
        end_admitted()
        a_pass(admission, world)
        passes += 1
        assert passes <= 2, "the single task waits behind the set"
    assert passes == 1  # admitted in the first pass with a free slot
    # The set goes on beside it, and a late materialization still costs rows only for what was made.
    assert SetElement.objects.filter(task_set_id=created["id"]).count() < 300
    assert Task.objects.filter(state__in=("SUBMITTING", "STARTING"), set_element__isnull=False).count() == SLOTS - 1


def test_equal_shares_take_turns_and_the_least_running_goes_first(world):
    bob = [submit(world.bob, name=f"b{i}") for i in range(3)]
    alice = [submit(world.alice, name=f"a{i}") for i in range(2)]
    charlie = [submit(world.charlie, name=f"c{i}") for i in range(2)]
    heads = bob + alice + charlie
    alpha, beta = world.alpha.pk, world.beta.pk
    names = [task.name for task in fair_order(heads, {})]
    # Between projects: alpha, beta, alpha, beta …; within alpha: bob, alice, bob, alice, then bob's last.
    assert names == ["b0", "c0", "a0", "c1", "b1", "a1", "b2"]
    running = {(alpha, world.bob.pk): 5}  # bob runs 5: alice's and beta's go first, bob's own order kept
    names = [task.name for task in fair_order(heads, running)]
    assert names == ["c0", "c1", "a0", "a1", "b0", "b1", "b2"]
    running = {(beta, world.charlie.pk): 1}
    assert [task.name for task in fair_order(heads, running)][:3] == ["b0", "a0", "c0"]


def test_each_owner_keeps_first_in_first_admitted_under_a_project_quota(world):
    from cloudpivot.accounts.models import Quota

    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=2)
    bob = [submit(world.bob, name=f"b{i}") for i in range(4)]
    alice = submit(world.alice, name="a0")
    assert connection_admit(connection_id=world.local.pk) == 2
    admitted = set(Task.objects.filter(state="SUBMITTING").values_list("pk", flat=True))
    assert admitted == {bob[0].pk, alice.pk}
    assert Task.objects.get(pk=bob[1].pk).state_reason == "waiting: project alpha quota on local: 2/2 tasks in use"
