"""User documents (JSON and YAML) parsed with hard limits, before anything else touches them.

A YAML document of a few hundred bytes can name one node a billion times through aliases
(the "billion laughs"); `yaml.safe_load` returns shared references, so the cost comes later,
when something walks the value (canonical JSON for the Idempotency-Key, validation, storage).
So the node graph is measured first, as it would be once expanded: its node count and depth,
with recursive aliases refused, and only a document within the limits is constructed.
Deep JSON nesting, which makes Python's parser raise RecursionError, is refused the same way.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

MAX_DEPTH = 32
MAX_NODES = 20_000


class DocumentError(ValueError):
    """The document cannot be read, or is beyond a limit; the message says which, in words.

    `syntax` is set for text that does not parse, with `where` (" (line L, column C)") and `problem`.
    """

    def __init__(self, message: str, *, syntax: bool = False, where: str = "", problem: str = "") -> None:
        super().__init__(message)
        self.syntax, self.where, self.problem = syntax, where, problem or message


def load_json(text: str, *, max_nodes: int = MAX_NODES) -> Any:
    """JSON within the limits; `max_nodes` is raised by a body that holds many small values (a task set's items)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise DocumentError(f"the document is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError as exc:
        raise DocumentError(f"JSON parse error: {exc}", syntax=True, problem=str(exc)) from None
    _check_value(value, max_nodes)
    return value


def load_yaml(text: str) -> Any:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise DocumentError(f"the document is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = str(getattr(exc, "problem", None) or exc)
        raise DocumentError(f"YAML parse error{where}: {problem}", syntax=True, where=where, problem=problem) from None
    if root is None:
        return None
    _measure_yaml(root)
    return yaml.safe_load(text)


def load_json_or_yaml(text: str) -> Any:
    """JSON when it parses as JSON (YAML is a superset, but JSON errors read better for JSON)."""
    try:
        return load_json(text)
    except DocumentError:
        return load_yaml(text)


def _measure_yaml(root: yaml.Node) -> None:
    """Node count and depth of the document as it would be once every alias is expanded."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, height)
    open_nodes: set[int] = set()

    def measure(node: yaml.Node) -> tuple[int, int]:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise DocumentError("the document refers to itself (a recursive YAML alias)")
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = (1, 1)
            return sizes[key]
        open_nodes.add(key)
        children = [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else node.value
        count, height = 1, 1
        for child in children:
            child_count, child_height = measure(child)
            count += child_count
            height = max(height, child_height + 1)
            if count > MAX_NODES:
                raise DocumentError(f"the document is too large with its aliases expanded (over {MAX_NODES} values)")
            if height > MAX_DEPTH:
                raise DocumentError(f"the document is nested too deeply (at most {MAX_DEPTH} levels)")
        open_nodes.discard(key)
        sizes[key] = (count, height)
        return sizes[key]

    measure(root)


def _check_value(value: Any, max_nodes: int = MAX_NODES) -> None:
    """The same limits for an already parsed value (JSON has no aliases: its size is what was sent)."""
    stack, count = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise DocumentError(f"the document is nested too deeply (at most {MAX_DEPTH} levels)")
        if count > max_nodes:
            raise DocumentError(f"the document is too large (over {max_nodes} values)")
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for pair in item.items() for child in pair)
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
