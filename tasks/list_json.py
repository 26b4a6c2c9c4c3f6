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

import json
import uuid
from typing import Any

from django.db import connection
from django.db.models import F, Func, TextField, Value
from django.db.models.functions import Cast, Substr
from django.utils import timezone

# The columns the page's statement reads beside the row's JSON: the cursor's position (created_at) and what the
# queue places need (selectors.queue_positions).
PLAIN_COLUMNS = ("id", "state", "connection_id", "created_at")


def supported() -> bool:
    """PostgreSQL, with dates written in UTC (the only zone the API answers in unless a zone is activated)."""
    return connection.vendor == "postgresql" and timezone.get_current_timezone_name() == "UTC"


class _Iso8601(Func):
    """DRF's DateTimeField text in UTC: `2026-12-03T17:05:04.123456Z`, the fraction left out when it is 0
    (Python's isoformat), NULL for NULL."""

    template = (
        "(to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')"
        " || COALESCE(NULLIF(to_char(%(expressions)s AT TIME ZONE 'UTC', '.US'), '.000000'), '') || 'Z')"
    )
    output_field = TextField()

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return self.template % {"expressions": sql}, (*params, *params)


class _Joined(Func):
    arg_joiner = " || "
    template = "(%(expressions)s)"
    output_field = TextField()


class _JsonObject(Func):
    """json_build_object (json, not jsonb: keys stay in the order given) as text, so psycopg hands it over as a
    string instead of parsing it."""

    function = "JSON_BUILD_OBJECT"
    template = "%(function)s(%(expressions)s)::text"
    output_field = TextField()


def row_json(*, url_prefix: str) -> Func:
    """One list row as JSON text, TaskListSerializer's keys and values but `queue_position`."""
    task_id = Cast("id", TextField())
    fields: list[tuple[str, Any]] = [
        ("id", task_id),
        ("short_id", Substr(task_id, 1, 8)),  # uuid.hex[:8]: the characters before the first dash
        ("url", _Joined(Value(url_prefix), task_id)),
        ("name", F("name")),
        ("state", F("state")),
        ("state_reason", F("state_reason")),
        ("state_changed_at", _Iso8601("state_changed_at")),
        ("cloud", F("connection__cloud_id")),
        ("backend", F("backend")),
        ("project", F("project__slug")),
        ("owner", F("owner__username")),
        ("spec", F("normalized")),
        ("spec_sha256", F("spec_sha256")),
        ("retry_limit", F("retry_limit")),
        ("timeout_seconds", F("timeout_seconds")),
        ("attempts_count", F("attempts_count")),
        ("failed_attempts", F("failed_attempts")),
        ("exit_code", F("exit_code")),
        ("result", F("result")),
        ("next_attempt_at", _Iso8601("next_attempt_at")),
        ("created_at", _Iso8601("created_at")),
        ("started_at", _Iso8601("started_at")),
        ("finished_at", _Iso8601("finished_at")),
        ("last_event_seq", F("last_event_seq")),
    ]
    return _JsonObject(*(part for key, value in fields for part in (Value(key), value)))


def page_body(*, next_url: str | None, previous_url: str | None, rows: list[dict], places: dict[uuid.UUID, int]) -> str:
    """The cursor page's answer (DRF's `{"next", "previous", "results"}`) around the rows' own JSON text, each
    with its `queue_position` as the last key."""
    results = ",".join(f'{row["row"][:-1]}, "queue_position" : {json.dumps(places.get(row["id"]))}}}' for row in rows)
    return f'{{"next":{json.dumps(next_url)},"previous":{json.dumps(previous_url)},"results":[{results}]}}'
