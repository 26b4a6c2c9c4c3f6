"""Many rows in one statement, without the ORM compiling every value of every row.

A Runner batch writes hundreds of rows (its events, their feed copies, log chunks) and updates tens of
attempts. `bulk_create` and `bulk_update` resolve each value through the field, the SQL compiler and the
driver's adapters one by one; for such a batch that is more CPU than the database spends on it. Here each
column is prepared once per row with the field's own `get_db_prep_save` (so values are stored exactly as
the ORM would store them), JSON is sent as text, and the rows travel as one multi-row statement:
`unnest` of one array per column on PostgreSQL, `VALUES (…), (…)` on SQLite.

Only plain concrete fields are handled: no signals are sent, `auto_now_add`/`auto_now` are applied by
`pre_save`, auto primary keys are read back with RETURNING (both databases support it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    AutoField,
    BigAutoField,
    CharField,
    DateTimeField,
    Field,
    IntegerField,
    JSONField,
    Model,
    SmallAutoField,
    TextField,
)

# SQLite allows 32,766 bound values per statement (3.32+); stay well below it.
SQLITE_MAX_VALUES = 30_000
_AUTO = (AutoField, BigAutoField, SmallAutoField)
_TEXT = (CharField, TextField)


def objects_insert(model: type[Model], objects: Sequence[Model], *, also_return: str = "") -> list:
    """INSERT `objects` in one statement per few thousand values; auto primary keys are set on them.

    `also_return`: an SQL expression the same statement evaluates for each inserted row (its columns named as
    `<table>.<column>`, quoted), e.g. a scalar subquery; its values are returned, in the objects' order."""
    if not objects:
        return []
    meta, db = model._meta, connections[DEFAULT_DB_ALIAS]
    auto_pk = isinstance(meta.pk, _AUTO) and all(obj.pk is None for obj in objects)
    fields = [field for field in meta.concrete_fields if not (auto_pk and field is meta.pk)]
    columns = [[_prep(db, field, field.pre_save(obj, True)) for obj in objects] for field in fields]
    returning = ([db.ops.quote_name(meta.pk.column)] if auto_pk else []) + ([also_return] if also_return else [])
    rows = rows_insert(db, meta.db_table, fields, columns, returning=returning)
    if auto_pk:
        for obj, row in zip(objects, rows, strict=True):
            obj.pk = row[0]
    for obj in objects:
        obj._state.adding = False
        obj._state.db = db.alias
    return [row[-1] for row in rows] if also_return else []


def rows_insert(
    db: BaseDatabaseWrapper, table: str, fields: list[Field], columns: list[list[Any]], *, returning: Sequence[str] = ()
) -> list[tuple]:
    """INSERT prepared column values (one list per field, rows in the same order); the rows of the `returning`
    SQL expressions, in order (none without them)."""
    quote = db.ops.quote_name
    names = ", ".join(quote(field.column) for field in fields)
    tail = f" RETURNING {', '.join(returning)}" if returning else ""
    rows = len(columns[0]) if columns else 0
    found: list[tuple] = []
    with db.cursor() as cursor:
        if db.vendor == "postgresql":
            arrays = ", ".join(f"%s::{_array_type(db, field)}" for field in fields)
            values = ", ".join(_cast(field, f"v.c{index}") for index, field in enumerate(fields))
            aliases = ", ".join(f"c{index}" for index in range(len(fields)))
            cursor.execute(
                f"INSERT INTO {quote(table)} ({names}) SELECT {values} FROM unnest({arrays}) AS v({aliases}){tail}",
                columns,
            )
            return [tuple(row) for row in cursor.fetchall()] if returning else []
        per_statement = max(1, SQLITE_MAX_VALUES // max(1, len(fields)))
        row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
        for start in range(0, rows, per_statement):
            stop = min(rows, start + per_statement)
            params = [column[index] for index in range(start, stop) for column in columns]
            cursor.execute(
                f"INSERT INTO {quote(table)} ({names}) VALUES {', '.join([row_sql] * (stop - start))}{tail}", params
            )
            if returning:
                found += [tuple(row) for row in cursor.fetchall()]
    return found


def rows_update(model: type[Model], fields: list[str], objects: Sequence[Model]) -> None:
    """Write `fields` of many rows in one `UPDATE … FROM`: `unnest` of one array per column on PostgreSQL (the
    client then quotes a dozen parameters, not one per value), `(VALUES …)` on SQLite (≥ 3.33).

    Django's bulk_update says the same with a CASE per field listing every row, built and resolved in
    Python: ~40 ms of CPU for 50 attempts × 8 fields, more than the query itself.
    """
    if not objects:
        return
    meta, db = model._meta, connections[DEFAULT_DB_ALIAS]
    quote = db.ops.quote_name
    columns = [meta.get_field(name) for name in fields]
    table = quote(meta.db_table)
    sets = ", ".join(f"{quote(column.column)} = v.column{index + 2}" for index, column in enumerate(columns))
    if db.vendor == "postgresql":  # one array per column, as rows_insert does: a few parameters, not one per value
        arrays = [[meta.pk.get_db_prep_value(obj.pk, db) for obj in objects]]
        arrays += [[_prep(db, column, getattr(obj, column.attname)) for obj in objects] for column in columns]
        types = [f"%s::{meta.pk.db_type(db)}[]"] + [f"%s::{_array_type(db, column)}" for column in columns]
        names = ", ".join(f"column{index + 1}" for index in range(len(arrays)))
        sets = ", ".join(
            f"{quote(column.column)} = {_cast(column, f'v.column{index + 2}')}" for index, column in enumerate(columns)
        )
        with db.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET {sets} FROM unnest({', '.join(types)}) AS v({names}) "
                f"WHERE {table}.{quote(meta.pk.column)} = v.column1",
                arrays,
            )
        return
    params: list[Any] = []
    for obj in objects:
        params.append(meta.pk.get_db_prep_value(obj.pk, db))
        params += [_prep(db, column, getattr(obj, column.attname)) for column in columns]
    row = "(" + ", ".join(["%s"] * (len(columns) + 1)) + ")"
    with db.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {sets} FROM (VALUES {', '.join([row] * len(objects))}) AS v "
            f"WHERE {table}.{quote(meta.pk.column)} = v.column1",
            params,
        )


def _prep(db: BaseDatabaseWrapper, field: Field, value: Any) -> Any:
    """The value as the database stores it; JSON as its text (cast on PostgreSQL, stored as is on SQLite).

    Plain values of plain fields (a str for text, an int for an integer, an aware datetime) take the last step of
    `get_db_prep_save` alone, the backend's adapter: its checks and conversions before it change nothing for them,
    and a batch has thousands of them. Anything else goes the whole way."""
    kind = type(value)
    if kind is str and isinstance(field, _TEXT):
        return value
    if kind is int and isinstance(field, IntegerField):
        return db.ops.adapt_integerfield_value(value, field.get_internal_type())
    if kind is datetime and value.tzinfo is not None and isinstance(field, DateTimeField):
        return db.ops.adapt_datetimefield_value(value)
    if isinstance(field, JSONField):
        return None if value is None and field.null else json.dumps(value, cls=field.encoder)
    return field.get_db_prep_save(value, db)


def _array_type(db: BaseDatabaseWrapper, field: Field) -> str:
    return "text[]" if isinstance(field, JSONField) else f"{field.db_type(db)}[]"


def _cast(field: Field, expression: str) -> str:
    return f"{expression}::jsonb" if isinstance(field, JSONField) else expression
