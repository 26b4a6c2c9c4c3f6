"""The exit statuses of the cloudpivot command, one table for --help, docs/cli.md and the code.

With --wait a task's own exit code passes through (0–79 and 128+ as the program gave it); the
CLI's own outcomes use 80–90 so a script can tell "the program said 3" from "it was cancelled".
"""

from __future__ import annotations

OK = 0
ERROR = 1  # anything not below: no context configured, an unreadable answer
USAGE = 2  # bad arguments or an unreadable spec file (argparse's own code)
FAILED_NO_CODE = 80  # the task FAILED without an exit code of its own (it never started)
CANCELLED = 81
TIMED_OUT = 82
UNKNOWN = 83  # CloudPivot cannot tell how the task ended (and it stayed so)
REFUSED = 84  # the server refused the request: 400, 413, 422 (the message names the field)
AUTH = 85  # 401 or 403: no valid token, or the role does not allow it
NOT_FOUND = 86  # 404
CONFLICT = 87  # 409: the request contradicts the current state (e.g. cancel of a finished task)
UNAVAILABLE = 88  # the server did not answer (after retrying) or answered 5xx/429
NOT_SUPPORTED = 89  # the server has no endpoint for this command
SET_INCOMPLETE = 90  # with `set submit --wait`: the set finished, but not every element SUCCEEDED
OUTPUT_MISMATCH = 91  # with `task outputs --download`: an output could not be fetched or did not match its SHA-256
PROVENANCE_INVALID = 92  # `provenance verify`, `task provenance --verify`: the signature does not verify

TABLE = [
    (OK, "success; with --wait: the task SUCCEEDED"),
    ("N", "with --wait: the task FAILED and its program exited with N (128+S when killed by signal S)"),
    (ERROR, "other errors (no server configured, unreadable answer)"),
    (USAGE, "usage error: bad arguments, unreadable or malformed spec file"),
    (FAILED_NO_CODE, "with --wait: the task FAILED without an exit code (e.g. the program never started)"),
    (CANCELLED, "with --wait: the task was CANCELLED"),
    (TIMED_OUT, "with --wait: the task TIMED_OUT"),
    (UNKNOWN, "with --wait: the task is UNKNOWN (CloudPivot cannot tell how it ended)"),
    (REFUSED, "the server refused the request (400/413/422); the message names the field at fault"),
    (AUTH, "not authenticated (401) or not allowed (403)"),
    (NOT_FOUND, "not found, or not visible to you (404)"),
    (CONFLICT, "conflict with the current state (409), e.g. an Idempotency-Key reused with another spec"),
    (UNAVAILABLE, "the server could not be reached (after retrying) or failed (5xx, 429)"),
    (NOT_SUPPORTED, "the server has no API for this command (e.g. `cloud check`)"),
    (SET_INCOMPLETE, "with `set submit --wait`: the set finished but some element did not succeed (81: cancelled)"),
    (OUTPUT_MISMATCH, "with `task outputs --download`: an output could not be fetched or its SHA-256 did not match"),
    (PROVENANCE_INVALID, "`provenance verify`, `task provenance --verify`: the bundle's signature does not verify"),
]

STATUS_CODES = {400: REFUSED, 413: REFUSED, 422: REFUSED, 401: AUTH, 403: AUTH, 404: NOT_FOUND, 409: CONFLICT}


def for_status(status: int) -> int:
    """The exit status for an HTTP error answer."""
    if status in STATUS_CODES:
        return STATUS_CODES[status]
    if status >= 500 or status == 429:
        return UNAVAILABLE
    return ERROR


def help_text() -> str:
    lines = ["exit status:"]
    lines += [f"  {str(code):>4}  {meaning}" for code, meaning in TABLE]
    return "\n".join(lines)
