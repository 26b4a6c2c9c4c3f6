"""Retry with changes: a partial task document over a set's template, for its failed elements' next attempts.

`{"resources": {"memory_mb": 4096}, "timeout_seconds": 600}` (or the task retry's dotted paths,
`{"resources.memory_mb": 4096}`) is read as its leaf fields by dotted path; each is set over the template
(an object is merged field by field, a list or a value replaces). Each failed element's task is then retried
through the task retry service with those fields as its element would have them (`{{lr}}` substituted), so an
element stays one task with its own id, attempts and history; the set's template itself does not change.
Pure functions over documents, as tasksets.templating.
"""

from __future__ import annotations

import copy
from typing import Any

from cloudpivot.exceptions import InvalidSpec
from tasks.specs import TaskSpecSerializer
from tasksets.templating import element_document

FIXED = ("cloud", "project")
MAX_CHANGES = 20


def changes_paths(changes: Any) -> dict[str, Any]:
    """The changes as dotted leaf paths → values, or InvalidSpec naming `changes` / `changes.<field>`."""
    if not isinstance(changes, dict) or not changes:
        raise _invalid("changes", 'must be a partial task document, e.g. {"resources": {"memory_mb": 4096}}')
    paths = _flatten(changes)
    if len(paths) > MAX_CHANGES:
        raise _invalid("changes", f"at most {MAX_CHANGES} fields at a time")
    known = TaskSpecSerializer().fields
    for path in paths:
        top = path.split(".")[0]
        if top in FIXED:
            raise _invalid(f"changes.{path}", "a retry runs on the set's own cloud and project")
        if top not in known:
            raise _invalid(f"changes.{path}", "is not a field of the task document")
    return paths


def changed_template(template: dict[str, Any], paths: dict[str, Any]) -> dict[str, Any]:
    """The template with each changed field set (objects on the way made), or InvalidSpec naming the field."""
    document = copy.deepcopy(template)
    for path, value in paths.items():
        *parents, leaf = path.split(".")
        here = document
        for part in parents:
            if here.get(part) is None:
                here[part] = {}
            if not isinstance(here[part], dict):
                raise _invalid(f"changes.{path}", f"{part} is not an object in the template")
            here = here[part]
        here[leaf] = copy.deepcopy(value)
    return document


def element_changes(
    template: dict[str, Any], paths: dict[str, Any], *, index: int, params: dict[str, Any] | None, set_name: str
) -> dict[str, Any]:
    """The changed fields as element `index` has them (placeholders substituted), for tasks' retry `changes`."""
    document = element_document(
        changed_template(template, paths), index=index, params=params, project=None, set_name=set_name
    )
    return {path: _get(document, path) for path in paths}


def _get(document: dict[str, Any], path: str) -> Any:
    here: Any = document
    for part in path.split("."):
        here = here.get(part) if isinstance(here, dict) else None
    return here


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, dict) and item:
            flat |= _flatten(item, f"{path}.")
        else:
            flat[path] = item
    return flat


def _invalid(field: str, message: str) -> InvalidSpec:
    return InvalidSpec(f"invalid change: {field}: {message}", errors=[{"field": field, "message": message}])
