"""The database settings the request path relies on (docs/decisions.md, "The request path")."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection, transaction


@pytest.mark.skipif(not settings.USING_SQLITE, reason="the embedded default's SQLite settings")
def test_sqlite_runs_in_wal_with_normal_sync_a_busy_timeout_and_immediate_writers(db):
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"  # readers never wait for the one writer
        cursor.execute("PRAGMA synchronous")
        assert cursor.fetchone()[0] == 1  # NORMAL: durable against process death, no fsync per commit
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] >= 10_000  # a writer queues for the lock instead of failing at once
    # IMMEDIATE: a transaction takes the write lock at BEGIN, so it never fails half-way on a lock upgrade
    assert connection.settings_dict["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    with transaction.atomic():
        assert connection.in_atomic_block


@pytest.mark.skipif(settings.USING_SQLITE, reason="PostgreSQL: one connection pool per process")
def test_postgresql_connections_come_from_a_pool(db):
    pool = connection.settings_dict["OPTIONS"]["pool"]
    assert pool["min_size"] >= 1 and pool["max_size"] >= 4
    assert connection.pool is not None
