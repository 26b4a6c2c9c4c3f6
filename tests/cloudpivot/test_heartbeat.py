"""cloudpivot.heartbeat: renewals on a thread of their own, surviving a failed one, closing their connection."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from django.db import connection, connections

from cloudpivot.heartbeat import Heartbeat
from tests.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class Renewals:
    """A renew function that reads the database from the heartbeat's thread and keeps what it saw."""

    def __init__(self, *, fail_first: int = 0, answer: bool | None = None) -> None:
        self.calls = 0
        self.fail_first, self.answer = fail_first, answer
        self.threads: set[int] = set()
        self.connections: list = []

    def __call__(self) -> bool | None:
        self.calls += 1
        self.threads.add(threading.get_ident())
        self.connections.append(connections["default"])  # this thread's own wrapper
        with connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM no_such_table" if self.calls <= self.fail_first else "SELECT 1")
        return self.answer


def test_renews_on_its_own_thread_until_the_block_ends_and_closes_that_threads_connection():
    renewals = Renewals()
    with Heartbeat(renewals, interval=0.05, name="beats") as beats:
        wait_for(lambda: renewals.calls >= 3, timeout=10, what="three renewals")
        assert beats.alive
    assert not beats.alive
    calls = renewals.calls
    time.sleep(0.2)
    assert renewals.calls == calls  # stopped: no renewal after the block
    assert renewals.threads and threading.get_ident() not in renewals.threads
    assert renewals.connections[-1] is not connections["default"]  # not the test's connection
    assert renewals.connections[-1].connection is None  # closed by the thread as it ended
    assert not beats.ended


def test_a_failed_renewal_is_logged_and_the_next_beat_renews_again(caplog):
    renewals = Renewals(fail_first=2)
    with caplog.at_level(logging.WARNING, logger="cloudpivot.heartbeat"):
        with Heartbeat(renewals, interval=0.05, name="lease-op1") as beats:
            wait_for(lambda: renewals.calls >= 4, timeout=10, what="renewals after two failures")
            assert beats.alive
    failures = [r.getMessage() for r in caplog.records if r.name == "cloudpivot.heartbeat"]
    assert len(failures) == 2, failures
    assert failures[0].startswith("lease-op1: a renewal failed, trying again")


def test_a_renewal_that_answers_false_ends_the_beats():
    renewals = Renewals(answer=False)
    beats = Heartbeat(renewals, interval=0.05, name="lost").start()
    try:
        wait_for(lambda: beats.ended, timeout=10, what="the beats ended")
        wait_for(lambda: not beats.alive, timeout=10, what="the thread gone")
    finally:
        beats.stop()
    assert renewals.calls == 1
    assert renewals.connections[-1].connection is None
