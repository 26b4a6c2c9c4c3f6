"""A parameter file as set items: JSON Lines (one object per line) or CSV with a header row.

Pure text in, items out, with the line each item came from, so a fault of item 17 can be named at its line.
CSV cells are numbers where they read as numbers (`0.1`, `3`, `1e-4`), else strings; an empty cell is "".
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from cloudpivot.exceptions import InvalidSpec

INTEGER = re.compile(r"[+-]?\d+")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
MAX_LINE_ERRORS = 5


@dataclass
class Params:
    items: list[dict[str, Any]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # the line of items[i] in the text (1-based)
    kind: str = ""  # "jsonl" or "csv"


def params_kind(text: str, filename: str = "") -> str:
    """CSV or JSON Lines: by the file's extension where it says, else by the first non-blank character."""
    name = filename.lower()
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    return "jsonl" if text.lstrip().startswith("{") else "csv"


def params_parse(text: str, filename: str = "") -> Params:
    """The items of a parameter file, or InvalidSpec naming the lines at fault (field `items`)."""
    kind = params_kind(text, filename)
    params = _jsonl(text) if kind == "jsonl" else _csv(text)
    params.kind = kind
    if not params.items:
        raise _invalid(["the parameter file has no items (one JSON object per line, or a CSV header and rows)"])
    return params


def cell_value(text: str) -> int | float | str:
    """A CSV cell: an int or a float where it reads as one, else the text as it is."""
    stripped = text.strip()
    if INTEGER.fullmatch(stripped):
        return int(stripped)
    if NUMBER.fullmatch(stripped):
        number = float(stripped)
        if math.isfinite(number):
            return number
    return text


def _jsonl(text: str) -> Params:
    params, errors = Params(), []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            errors.append(f"line {number}: not JSON ({exc.msg})")
            continue
        if not isinstance(value, dict):
            errors.append(f'line {number}: must be an object of parameters, e.g. {{"lr": 0.1}}')
            continue
        params.items.append(value)
        params.lines.append(number)
        if len(errors) >= MAX_LINE_ERRORS:
            break
    if errors:
        raise _invalid(errors)
    return params


def _csv(text: str) -> Params:
    rows = csv.reader(io.StringIO(text))
    params, errors = Params(), []
    header: list[str] | None = None
    for row in rows:
        number = rows.line_num
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            if len(set(header)) != len(header) or not all(header):
                errors.append(f"line {number}: the header row needs a distinct name per column")
                break
            continue
        if len(row) != len(header):
            errors.append(f"line {number}: {len(row)} values for {len(header)} columns")
        else:
            params.items.append({name: cell_value(cell) for name, cell in zip(header, row, strict=True)})
            params.lines.append(number)
        if len(errors) >= MAX_LINE_ERRORS:
            break
    if errors:
        raise _invalid(errors)
    return params


def _invalid(messages: list[str]) -> InvalidSpec:
    return InvalidSpec(
        f"invalid parameter file: {messages[0]}", errors=[{"field": "items", "message": m} for m in messages]
    )
