"""Printing API documents: aligned tables for people, JSON or YAML for programs."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import yaml

FORMATS = ("table", "wide", "json", "yaml")
Column = tuple[str, Callable[[dict], Any]]


def field(name: str) -> Callable[[dict], Any]:
    return lambda row: row.get(name)


def age(name: str) -> Callable[[dict], str]:
    """'3m', '2h', '5d' since the timestamp, as kubectl shows it."""

    def since(row: dict) -> str:
        value = row.get(name)
        if not value:
            return ""
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return str(value)
        seconds = max(0, int((datetime.now(UTC) - moment).total_seconds()))
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds >= size:
                return f"{seconds // size}{unit}"
        return f"{seconds}s"

    return since


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value).replace("\n", " ")


def table(rows: Iterable[dict], columns: list[Column], *, header: bool = True, out=None) -> None:
    out = out or sys.stdout
    cells = [[cell(get(row)) for _, get in columns] for row in rows]
    titles = [title for title, _ in columns]
    widths = [max([len(title)] + [len(line[i]) for line in cells]) for i, title in enumerate(titles)]
    lines = ([titles] if header else []) + cells
    for line in lines:
        out.write("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip() + "\n")
    out.flush()


def document(value: Any, fmt: str, out=None) -> None:
    """One document (or a list) as JSON or YAML."""
    out = out or sys.stdout
    if fmt == "yaml":
        yaml.safe_dump(value, out, sort_keys=False, allow_unicode=True)
    else:
        out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    out.flush()


def show(rows: list[dict], fmt: str, columns: list[Column], wide: list[Column] | None = None) -> None:
    if fmt in ("json", "yaml"):
        document(rows, fmt)
    else:
        table(rows, columns + (wide or []) if fmt == "wide" else columns)


def details(pairs: list[tuple[str, Any]], out=None) -> None:
    """'Key:  value' lines, as `describe` prints them."""
    out = out or sys.stdout
    width = max(len(key) for key, _ in pairs) + 1
    for key, value in pairs:
        out.write(f"{key + ':':<{width}}  {cell(value)}\n")
