"""Which database errors mean "the database is away" (503 + Retry-After) and which stay errors.

The errors are the drivers' own, provoked for real: a refused connection, a locked SQLite file, a missing table.
"""

from __future__ import annotations

import json
import sqlite3

import psycopg
import pytest
from django.db import IntegrityError, InterfaceError, OperationalError
from django.test import RequestFactory

from cloudpivot.unavailable import DatabaseUnavailableMiddleware, is_storage_full, is_unavailable
from tests import helpers


def _wrapped(driver_error: Exception, django_class=OperationalError) -> Exception:
    """As Django's DatabaseErrorWrapper raises it: the Django class, the driver's error as its cause."""
    try:
        raise django_class(*driver_error.args) from driver_error
    except django_class as exc:
        return exc


def test_a_refused_postgresql_connection_is_unavailability():
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(host="127.0.0.1", port=helpers.free_port(), user="postgres", connect_timeout=2)
    assert is_unavailable(_wrapped(refused.value))
    assert is_unavailable(InterfaceError("connection already closed"))


def test_a_locked_sqlite_file_is_unavailability_and_a_missing_table_is_not(tmp_path):
    path = tmp_path / "db.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError) as locked:
        other.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError) as missing:
        other.execute("SELECT * FROM nowhere")
    holder.close()
    other.close()
    assert is_unavailable(_wrapped(locked.value))
    assert not is_unavailable(_wrapped(missing.value))
    assert not is_unavailable(_wrapped(sqlite3.IntegrityError("UNIQUE constraint failed"), IntegrityError))


def test_the_middleware_answers_json_for_the_apis_and_a_page_for_people():
    middleware = DatabaseUnavailableMiddleware(lambda request: None)
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(host="127.0.0.1", port=helpers.free_port(), user="postgres", connect_timeout=2)
    away = _wrapped(refused.value)
    api = middleware.process_exception(RequestFactory().get("/api/v1/tasks"), away)
    assert (api.status_code, api["Content-Type"], api["Retry-After"]) == (503, "application/json", "5")
    assert b'"database_unavailable"' in api.content and b"127.0.0.1" not in api.content
    page = middleware.process_exception(RequestFactory().get("/tasks/"), away)
    assert (page.status_code, page["Retry-After"]) == (503, "5") and b"briefly unavailable" in page.content
    assert middleware.process_exception(RequestFactory().get("/tasks/"), ValueError("a bug")) is None


def test_a_full_sqlite_file_is_storage_full_and_answers_507(tmp_path):
    """SQLITE_FULL provoked for real: a database limited to a few pages (the same error as a full disk)."""
    db = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    db.execute("PRAGMA max_page_count = 3")
    db.execute("CREATE TABLE t (x)")
    with pytest.raises(sqlite3.OperationalError) as full:
        db.execute("INSERT INTO t VALUES (?)", (b"\0" * 100_000,))
    db.close()
    error = _wrapped(full.value)
    assert is_unavailable(error) and is_storage_full(error)
    middleware = DatabaseUnavailableMiddleware(lambda request: None)
    api = middleware.process_exception(RequestFactory().post("/api/v1/tasks"), error)
    assert (api.status_code, api["Retry-After"]) == (507, "5")
    assert json.loads(api.content)["code"] == "storage_full" and "free space" in json.loads(api.content)["message"]
    page = middleware.process_exception(RequestFactory().get("/tasks/"), error)
    assert page.status_code == 507 and b"storage is full" in page.content
