"""A start whose cloud is slow is not claimed again while it is under way (tasks/services/start_claim.py).

The Kubernetes API server (kmock, on loopback) sits behind a loopback TCP proxy that holds every Job create
for SLOW seconds before passing it on, as a slow API server would. One reconcile step (`starts_due`, in a
thread: one worker) claims the attempt and asks for its Job; another runs once the claim would be
START_RETRY_SECONDS old, while the first still waits for the answer. It finds the claim renewed and asks
nothing: the API server sees one create request (without the renewal: two, the second answered 409).
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection as db_connection

from tasks.choices import AttemptState
from tasks.models import Attempt
from tasks.services.admission import admit_all
from tasks.services.reconcile import START_RETRY_SECONDS, starts_due
from tasks.services.submission import task_submit
from tests import helpers
from tests.clusters.slow_proxy import SlowProxy, job_creates

pytestmark = pytest.mark.django_db(transaction=True)

SLOW = START_RETRY_SECONDS + 4


def claimed_at(attempt_id: int):
    """When the attempt was claimed (or its claim last renewed); None while it is not claimed."""
    claimed = Attempt.objects.filter(pk=attempt_id, state=AttemptState.STARTING)
    return claimed.values_list("updated_at", flat=True).first()


def test_a_slow_create_is_not_claimed_again_while_it_is_under_way(kube, kube_connection, world):
    proxy = SlowProxy(kube.url, SLOW, slow=job_creates)
    kube_connection.endpoint = proxy.url
    kube_connection.save(update_fields=["endpoint"])
    task, _ = task_submit(user=world.bob, document={"cloud": "k3s-lab", "image": "busybox", "command": ["true"]})
    admit_all(agent_served_too=False)
    attempt = Attempt.objects.get(task=task)
    first: list[int] = []

    def one_worker() -> None:
        try:
            first.append(starts_due())
        finally:
            db_connection.close()

    worker = threading.Thread(target=one_worker, name="first-pass")
    try:
        worker.start()
        claimed = helpers.wait_for(
            lambda: claimed_at(attempt.pk),
            timeout=10,
            interval=0.05,
            what="the first pass to claim the attempt",
        )
        time.sleep(START_RETRY_SECONDS + 1.5)  # the claim, unrenewed, would be due again by now
        assert worker.is_alive(), "the create was not slow: the test shows nothing"
        assert starts_due() == 0, "a second pass claimed a start still under way"
        assert Attempt.objects.get(pk=attempt.pk).updated_at > claimed  # renewed by the first pass's worker
    finally:
        worker.join(SLOW + 30)
        proxy.close()
    assert first == [1]
    task.refresh_from_db()
    assert task.state == "STARTING", task.state_reason
    assert kube.job_creations() == [attempt.external_name]
