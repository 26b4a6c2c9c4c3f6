"""The task list's rows written as JSON by PostgreSQL (GET /api/v1/tasks), not by Python.

What was left of a list request's CPU in the web process was per row: psycopg decoding 50 `normalized`
documents and 200 timestamps, the row dicts, the ISO dates, and the JSON encoder writing it all again. Here the
page's one statement returns each row as JSON text (`json_build_object`, keys in TaskSerializer's order) and the
view joins the texts into the answer: the web process's work no longer grows with the rows' content, and the
database does it on the other core. The same shape as TaskListSerializer (the SQLite path, and the fallback for
a time zone other than UTC), held to it by tests/tasks/test_api_list_rows.py on PostgreSQL.

`queue_position` is not in the SQL: it is the page's one window query (selectors.queue_positions), added to
each row's text as its last key.
"""

from __future__ import annotations

import functools
import json
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import TextField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from cloudpivot.accounts.models import Project
from clusters.models import CloudConnection
from tasks.models import Task

# The columns the page's statement reads beside the row's JSON: the cursor's position (created_at) and what the
# queue places need (selectors.queue_positions).
PLAIN_COLUMNS = ("id", "state", "connection_id", "created_at")


def supported() -> bool:
    """PostgreSQL, with dates written in UTC (the only zone the API answers in unless a zone is activated)."""
    return connection.vendor == "postgresql" and timezone.get_current_timezone_name() == "UTC"


def _iso8601(column: str) -> str:
    """DRF's DateTimeField text in UTC: `2026-12-03T17:05:04.123456Z`, the fraction left out when it is 0
    (Python's isoformat), NULL for NULL."""
    return (
        f"(to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')"
        f" || COALESCE(NULLIF(to_char({column} AT TIME ZONE 'UTC', '.US'), '.000000'), '') || 'Z')"
    )


@functools.cache
def _row_sql() -> str:
    """json_build_object over the task table's row (json, not jsonb: the keys stay in TaskSerializer's order),
    as text so that psycopg hands it over as a string instead of parsing it. Written once: an ORM expression
    of 24 fields cost more CPU to build and compile per request than the rows it saved. It names the task
    table as Django's query does (its alias is its name: the list's filters join nothing), and reads the three
    names by primary key (a subquery each, memoized by PostgreSQL for the page's few distinct ids)."""
    quote = connection.ops.quote_name
    task = quote(Task._meta.db_table)

    def column(name: str) -> str:
        return f"{task}.{quote(Task._meta.get_field(name).column)}"

    def name_of(model: Any, field: str, key: str) -> str:
        table = quote(model._meta.db_table)
        return f"(SELECT {quote(field)} FROM {table} WHERE {table}.{quote('id')} = {column(key)})"

    task_id = f"{column('id')}::text"
    fields = [
        ("id", task_id),
        ("short_id", f"substr({task_id}, 1, 8)"),  # uuid.hex[:8]: the characters before the first dash
        ("url", f"(%s || {task_id})"),
        ("name", column("name")),
        ("state", column("state")),
        ("state_reason", column("state_reason")),
        ("state_changed_at", _iso8601(column("state_changed_at"))),
        ("cloud", name_of(CloudConnection, "cloud_id", "connection")),
        ("backend", column("backend")),
        ("project", name_of(Project, "slug", "project")),
        ("owner", name_of(get_user_model(), "username", "owner")),
        ("spec", column("normalized")),
        ("egress", f"COALESCE({column('normalized')} -> 'egress', '\"open\"'::jsonb)"),  # egress.task_egress
        ("spec_sha256", column("spec_sha256")),
        ("retry_limit", column("retry_limit")),
        ("timeout_seconds", column("timeout_seconds")),
        ("attempts_count", column("attempts_count")),
        ("failed_attempts", column("failed_attempts")),
        ("exit_code", column("exit_code")),
        ("result", column("result")),
        ("next_attempt_at", _iso8601(column("next_attempt_at"))),
        ("created_at", _iso8601(column("created_at"))),
        ("started_at", _iso8601(column("started_at"))),
        ("finished_at", _iso8601(column("finished_at"))),
        ("last_event_seq", column("last_event_seq")),
    ]
    return "json_build_object(" + ", ".join(f"'{key}', {value}" for key, value in fields) + ")::text"


def row_json(*, url_prefix: str) -> RawSQL:
    """One list row as JSON text, TaskListSerializer's keys and values but `queue_position`."""
    return RawSQL(_row_sql(), [url_prefix], output_field=TextField())


def page_body(*, next_url: str | None, previous_url: str | None, rows: list[dict], places: dict[uuid.UUID, int]) -> str:
    """The cursor page's answer (DRF's `{"next", "previous", "results"}`) around the rows' own JSON text, each
    with its `queue_position` as the last key."""
    results = ",".join(f'{row["row"][:-1]}, "queue_position" : {json.dumps(places.get(row["id"]))}}}' for row in rows)
    return f'{{"next":{json.dumps(next_url)},"previous":{json.dumps(previous_url)},"results":[{results}]}}'
