"""Waiting for a task to end and following its log and events, resuming by offset/seq after lost connections.

The client retries reads while the server is away (CLOUDPIVOT_RETRY_SECONDS), and every read starts from
the last offset (or seq) printed, so a follow across a server restart shows each byte (event) once.
"""

from __future__ import annotations

import os
import sys
import time

from cloudpivot_cli import exitcodes
from cloudpivot_cli.client import Client

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"}
POLL_SECONDS = float(os.environ.get("CLOUDPIVOT_POLL_SECONDS", "0.5"))
# UNKNOWN may be verified into another state when the Runner speaks again; --wait gives it this long.
UNKNOWN_GRACE_SECONDS = float(os.environ.get("CLOUDPIVOT_UNKNOWN_GRACE_SECONDS", "120"))
# A terminal task whose log does not close within this is done anyway (its last bytes were lost).
LOG_SETTLE_SECONDS = 10.0


class Ending:
    """Tells whether a task has ended for a waiting command: terminal, or UNKNOWN for longer than the grace."""

    def __init__(self) -> None:
        self.unknown_since: float | None = None

    def __call__(self, task: dict) -> bool:
        if task["state"] in TERMINAL:
            return True
        if task["state"] != "UNKNOWN":
            self.unknown_since = None
            return False
        self.unknown_since = self.unknown_since or time.monotonic()
        return time.monotonic() - self.unknown_since > UNKNOWN_GRACE_SECONDS


def task_path(task_id: str) -> str:
    return f"/api/v1/tasks/{task_id}"


def wait(client: Client, task_id: str) -> dict:
    ended = Ending()
    while True:
        task = client.get(task_path(task_id))
        if ended(task):
            return task
        time.sleep(POLL_SECONDS)


def logs(
    client: Client,
    task_id: str,
    *,
    attempt: int | None = None,
    stream: str | None = None,
    follow: bool = False,
    out=None,
) -> dict | None:
    """Print the log from offset 0; with follow, until the task ends (across its attempts unless one is named).

    Returns the task as last read when following."""
    out = out or sys.stdout
    pinned, offset, ended = attempt, 0, Ending()
    quiet_since: float | None = None
    while True:
        body = client.get(f"{task_path(task_id)}/logs", offset=offset, attempt=pinned, stream=stream)
        if body["data"]:
            out.write(body["data"])
            out.flush()
        offset = body["next_offset"]
        if pinned is None and body.get("attempt"):
            pinned = body["attempt"]  # offsets belong to one attempt: never apply them to a newer one
        if body["data"] and not body["complete"]:
            quiet_since = None
            continue  # more may be there already
        if not follow:
            return None
        task = client.get(task_path(task_id))
        if body["complete"]:
            if attempt is None and pinned and task["attempts_count"] > pinned:
                pinned, offset = pinned + 1, 0
                print(f"cloudpivot: --- attempt {pinned} ---", file=sys.stderr)
                continue
            if attempt is not None or ended(task):
                return task
        elif ended(task):
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > LOG_SETTLE_SECONDS:
                return task
        time.sleep(POLL_SECONDS)


def event_line(event: dict) -> str:
    return f"{event.get('time', '')}  {event['seq']:>5}  {event.get('type', ''):<12}  {event.get('message', '')}"


def events(client: Client, task_id: str, *, after: int = 0, follow: bool = False, printer=None) -> None:
    """Print events after `after` in seq order; with follow, until the task ends and its last event is shown."""
    printer = printer or (lambda event: print(event_line(event), flush=True))
    ended = Ending()
    while True:
        body = client.get(f"{task_path(task_id)}/events", after_seq=after, limit=1000)
        for event in body["events"]:
            printer(event)
        after = body["next_after_seq"]
        if body["has_more"]:
            continue
        if not follow:
            return
        task = client.get(task_path(task_id))
        if ended(task) and after >= (task.get("last_event_seq") or 0):
            return
        time.sleep(POLL_SECONDS)


def exit_status(client: Client, task: dict) -> int:
    """The exit status `--wait` ends with: the program's own code, or one of the CLI's (see exitcodes)."""
    state = task["state"]
    if state == "SUCCEEDED":
        return exitcodes.OK
    if state == "CANCELLED":
        return exitcodes.CANCELLED
    if state == "TIMED_OUT":
        return exitcodes.TIMED_OUT
    if state == "FAILED":
        if task.get("exit_code") is not None:
            return int(task["exit_code"]) & 0xFF
        attempts = client.get(f"{task_path(task['id'])}/attempts")["attempts"]
        last = attempts[-1] if attempts else {}
        if last.get("exit_code") is not None:
            return int(last["exit_code"]) & 0xFF
        if last.get("exit_signal"):
            return 128 + int(last["exit_signal"])
        return exitcodes.FAILED_NO_CODE
    return exitcodes.UNKNOWN
