"""A forked child never uses its parent's PostgreSQL connections (qcluster forks its workers).

Django keeps the psycopg pool in a class attribute, so a child forked by qcluster's sentinel inherits the
pool and its open sockets: two processes then speak on one connection, each reading the other's answers
("the last operation didn't produce records (command status: BEGIN)"), and a restarted database is
recovered by neither. After a fork the child puts the inherited pools and connections aside, never used and
never closed (closing would end the parent's session on the server), and opens its own on first use.
"""

from __future__ import annotations

import os

_inherited: list[object] = []  # kept referenced for the child's life: their finalisers would close the sockets


def _forget_inherited_connections() -> None:
    from django.db import connections
    from django.db.backends.postgresql.base import DatabaseWrapper

    pools = DatabaseWrapper._connection_pools
    _inherited.extend(pools.values())
    pools.clear()
    for connection in connections.all(initialized_only=True):
        if connection.vendor == "postgresql" and connection.connection is not None:
            _inherited.append(connection.connection)
            connection.connection = None
            connection.in_atomic_block = False
            connection.savepoint_ids = []
            connection.needs_rollback = False


def install() -> None:
    os.register_at_fork(after_in_child=_forget_inherited_connections)
