"""A retry with changes: the task's spec with a few fields changed, checked as a submission is, and the
record of what changed so each attempt's own spec can be told later (the compare view).

Changes are given by dotted field path (`resources.memory_mb`, `timeout_seconds`, `image`). The changed
document goes through the same checks as a submission (the document, the cloud's checks, "can it ever
fit"), so a bad value is a 400 naming the field. The task keeps its cloud and project.
"""

from __future__ import annotations

import copy
from typing import Any

from cloudpivot.accounts import quotas
from cloudpivot.accounts.project_secrets import secret_references_check
from cloudpivot.exceptions import InvalidSpec
from clusters.task_checks import task_spec_check
from tasks.models import Task
from tasks.specs import TaskSpecSerializer, spec_normalize

FIXED = ("cloud", "project")
MAX_CHANGES = 20


def spec_apply_changes(*, task: Task, changes: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The task's normalized spec with `changes` applied and checked, and the differences [{field, from, to}]."""
    if not isinstance(changes, dict) or not changes:
        raise _invalid("changes", 'must be an object of field paths and values, e.g. {"resources.memory_mb": 512}')
    if len(changes) > MAX_CHANGES:
        raise _invalid("changes", f"at most {MAX_CHANGES} changes at a time")
    # The document's own fields only: what the cloud's checks pinned (an OpenStack image's id) is pinned again
    # by the same checks below, for the image the changed document names.
    known = TaskSpecSerializer().fields
    document = {key: copy.deepcopy(value) for key, value in task.normalized.items() if key in known}
    for path, value in changes.items():
        if not isinstance(path, str) or not path or path.split(".")[0] in FIXED:
            raise _invalid(str(path), "a retry runs on the task's own cloud and project; submit a new task instead")
        if not _set_path(document, path, value):
            raise _invalid(path, "is not a field of the task document")
    spec = spec_normalize(document)
    spec.pop("project", None)
    if spec.get("secrets") and spec.get("secrets") != task.normalized.get("secrets"):
        secret_references_check(project_id=task.project_id, references=spec["secrets"])
    spec = task_spec_check(connection=task.connection, project=task.project, spec=spec)
    quotas.check_can_ever_fit(
        project=task.project, connection_id=task.connection_id, footprint=quotas.task_footprint(spec)
    )
    spec["project"] = task.project.slug
    return spec, spec_differences(task.normalized, spec)


def spec_differences(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Every leaf field whose value differs, by dotted path (a list is one value); a missing field reads as null."""
    left, right = _flatten(before), _flatten(after)
    return [
        {"field": field, "from": left.get(field), "to": right.get(field)}
        for field in sorted(set(left) | set(right))
        if left.get(field) != right.get(field)
    ]


def specs_by_attempt(task: Task) -> dict[int, dict[str, Any]]:
    """attempt number → the spec it ran: the task's spec, with each later `spec_changed` event undone."""
    undo: dict[int, list[list[dict[str, Any]]]] = {}
    for data in task.events.filter(type="spec_changed").order_by("seq").values_list("data", flat=True):
        undo.setdefault(int(data.get("attempt") or 0), []).append(data.get("changes") or [])
    spec = copy.deepcopy(task.normalized)
    result = {}
    for number in range(task.attempts_count, 0, -1):
        for changes in reversed(undo.get(number + 1, [])):  # the changes made for the attempt after it
            for change in reversed(changes):
                _set_path(spec, change["field"], change["from"])
        result[number] = copy.deepcopy(spec)
    return result


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and (value or not prefix):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat |= _flatten(item, f"{prefix}{key}.")
        return flat
    return {prefix.rstrip("."): value}


def _set_path(document: dict[str, Any], path: str, value: Any) -> bool:
    """Set a dotted path inside the document (making objects on the way); False if it runs through a non-object."""
    *parents, leaf = path.split(".")
    here = document
    for part in parents:
        nxt = here.get(part)
        if nxt is None:
            nxt = here[part] = {}
        if not isinstance(nxt, dict):
            return False
        here = nxt
    here[leaf] = value
    return True


def _invalid(field: str, message: str) -> InvalidSpec:
    return InvalidSpec(f"invalid change: {field}: {message}", errors=[{"field": field, "message": message}])
