"""Project secrets on their way to an execution, and out of its log again.

The task document holds references only (`secrets: [{name, env | file}]`); the values are read here, at
the moment an attempt is handed to its Runner or host agent or started in Kubernetes, and go nowhere else.
What the program prints of them is masked before the log is stored (`log_mask`).
"""

from __future__ import annotations

from typing import Any

from cloudpivot.accounts.project_secrets import secret_values
from tasks.models import Task

MASK = b"***"


def task_secret_refs(task: Task) -> list[dict[str, Any]]:
    return list((task.normalized or {}).get("secrets") or [])


def task_secrets(task: Task) -> tuple[dict[str, str], str]:
    """(name → value of the task's secrets, "" or the words for those deleted since the task was submitted)."""
    refs = task_secret_refs(task)
    if not refs:
        return {}, ""
    found = secret_values(project_id=task.project_id, names=[ref["name"] for ref in refs])
    values = {name: value for name, value in found.items() if value is not None}
    missing = sorted({ref["name"] for ref in refs} - set(found))
    unreadable = sorted(set(found) - set(values))
    errors = []
    if missing:
        errors.append(f"the project secret {', '.join(repr(name) for name in missing)} no longer exists")
    if unreadable:
        names = ", ".join(repr(name) for name in unreadable)
        errors.append(f"the project secret {names} cannot be decrypted with the server's key (CLOUDPIVOT_SECRETS_KEY)")
    return values, "; ".join(errors) + ("; the program was not started" if errors else "")


def assignment_secrets(task: Task) -> dict[str, Any]:
    """What a Runner's or the host agent's assignment adds: env values, files to write, or why it cannot run."""
    values, error = task_secrets(task)
    if not values and not error:
        return {}
    env = {
        ref["env"]: values[ref["name"]] for ref in task_secret_refs(task) if ref.get("env") and ref["name"] in values
    }
    files = [
        {"path": ref["file"], "content": values[ref["name"]]}
        for ref in task_secret_refs(task)
        if ref.get("file") and ref["name"] in values
    ]
    return {"secret_env": env, "secret_files": files, "secret_error": error}


def log_mask_values(task: Task) -> list[bytes]:
    """The byte strings to mask in the task's log, longest first (so a value containing another is masked whole)."""
    if not task_secret_refs(task):
        return []
    values, _ = task_secrets(task)
    return sorted({value.encode() for value in values.values() if value}, key=len, reverse=True)


def log_mask_across(tail: bytes, data: bytes, values: list[bytes]) -> tuple[bytes, bytes]:
    """A value split between the end of the stream's previous piece (`tail`) and the start of `data`:
    both parts become `*` (as long as they are, so neither piece changes length). Returns (tail, data)."""
    if not tail:
        return tail, data
    joined = bytearray(tail + data)
    for value in values:
        start = max(0, len(tail) - len(value) + 1)
        while (found := joined.find(value, start, len(tail) + len(value) - 1)) != -1:
            joined[found : found + len(value)] = b"*" * len(value)
            start = found + 1
    return bytes(joined[: len(tail)]), bytes(joined[len(tail) :])


def report_mask(task: Task, value: Any) -> Any:
    """A Runner report's words (a progress message, a result's summary and refs, an exit or loss reason) with
    the task's secret values masked as in its log: a program may print a secret anywhere it reports. The values
    are read once per task object (a batch of reports decrypts them once)."""
    if not task_secret_refs(task):
        return value
    if not hasattr(task, "_report_mask_values"):
        task._report_mask_values = [v.decode() for v in log_mask_values(task)]
    return _masked(value, task._report_mask_values)


def _masked(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, MASK.decode()[: len(secret)])
        return value
    if isinstance(value, list):
        return [_masked(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: _masked(item, secrets) for key, item in value.items()}
    return value


def log_mask(data: bytes, values: list[bytes]) -> bytes:
    """`data` with every occurrence of the values replaced by `***` (never longer than what it replaces).

    The replacement never makes a piece longer, so the stored log's offsets stay within the program's."""
    for value in values:
        if value in data:
            data = data.replace(value, MASK[: len(value)])
    return data
