"""Member changes under concurrency: two admins demoting each other at once leave the project one admin."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from cloudpivot.accounts.models import Membership, Project, Role
from cloudpivot.accounts.services import membership_change_role
from cloudpivot.exceptions import ApplicationError

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_admins_demoting_each_other_at_once_leave_one_admin(world):
    bob = Membership.objects.get(project=world.alpha, user=world.bob)
    bob.role = Role.ADMIN
    bob.save()
    alice = Membership.objects.get(project=world.alpha, user=world.alice)
    outcome: list[object] = []

    def bob_demotes_alice():
        try:
            outcome.append(membership_change_role(actor=world.bob, membership=alice, role=Role.READER))
        except ApplicationError as exc:
            outcome.append(exc)
        finally:
            connection.close()

    with transaction.atomic():  # alice's change holds the project's lock while bob's starts
        Project.objects.select_for_update().filter(pk=world.alpha.pk).first()
        other = threading.Thread(target=bob_demotes_alice)
        other.start()
        time.sleep(1)  # bob's request has checked his role and waits for the lock (or, on SQLite, the writer)
        Membership.objects.filter(pk=bob.pk).update(role=Role.SUBMITTER)  # alice demotes bob meanwhile
    other.join(timeout=60)
    assert not other.is_alive()
    assert isinstance(outcome[0], ApplicationError), outcome
    assert list(
        Membership.objects.filter(project=world.alpha, role=Role.ADMIN).values_list("user__username", flat=True)
    ) == ["alice"]
