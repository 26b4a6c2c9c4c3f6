"""Copying a pod's log: one GET with timestamps past a cursor, each line returned once across calls.

The cursor keeps the last line's timestamp (ns) and how many lines carried exactly that timestamp. The
API server passes `sinceTime` to the kubelet with second precision, so lines before the cursor come back
and are dropped here. A running pod's log is copied at most every `log_interval_seconds` (per process),
plus once more when the pod ends.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from typing import Any

from clusters.backends.base import AttemptRef, LogPiece
from clusters.backends.kubernetes.client import KubeApiError, KubeClient
from clusters.backends.kubernetes.labels import CONTAINER, LABEL_ATTEMPT
from clusters.backends.kubernetes.observation import PodView, container_started, newest_pod

# When each attempt's running pod log was last copied (per process): throttles log copying to log_interval_seconds.
_last_log_copy: dict[tuple[str, str], float] = {}
_last_log_copy_lock = threading.Lock()


def fetch_pod_logs(
    client: KubeClient, attempt: AttemptRef, cursor: dict[str, Any], view: PodView | None
) -> tuple[list[LogPiece], dict[str, Any]]:
    """New log lines of the attempt's pod since `cursor` (`view`: what this pass's observe saw of the pod)."""
    key = (client.connection.cloud_id, attempt.external_name)
    if view is None:
        view = find_pod(client, attempt)
        if view is None:
            return [], cursor
    if not view.started:
        return [], cursor
    if not view.finished:
        with _last_log_copy_lock:
            last = _last_log_copy.get(key)
            if last is not None and time.monotonic() - last < float(client.options["log_interval_seconds"]):
                return [], cursor
            if len(_last_log_copy) > 100_000:  # attempts that vanished never pop their entry
                _last_log_copy.clear()
            _last_log_copy[key] = time.monotonic()
    else:
        with _last_log_copy_lock:
            _last_log_copy.pop(key, None)
    if cursor.get("pod") != view.name:
        cursor = {"pod": view.name}
    limit = int(client.options["log_limit_bytes"])
    for _ in range(6):
        try:
            raw = read_pod_log(client, view.name, since=cursor.get("since"), limit=limit)
        except KubeApiError as exc:
            if exc.status in (400, 404):  # not started yet, or already gone: nothing to copy now
                return [], cursor
            raise
        data, new_cursor = new_log_lines(raw, cursor, limit=limit)
        # sinceTime has whole seconds: lines already copied come back first. If they alone fill the
        # limit, ask again for more rather than stall.
        if data or len(raw) < limit:
            break
        limit *= 4
    cursor = new_cursor
    return ([LogPiece("stdout", data)] if data else []), cursor


def find_pod(client: KubeClient, attempt: AttemptRef) -> PodView | None:
    pod = newest_pod(
        client.pods(
            what=f"listing the pods of {attempt.external_name}",
            label_selector=f"{LABEL_ATTEMPT}={attempt.external_name},{client.selector}",
        )
    )
    if pod is None:
        return None
    phase = (pod.get("status") or {}).get("phase")
    return PodView(
        name=pod["metadata"]["name"], started=container_started(pod), finished=phase in ("Succeeded", "Failed")
    )


def read_pod_log(client: KubeClient, pod: str, *, since: str | None, limit: int) -> bytes:
    """GET the pod log with timestamps (the generated method lacks `sinceTime`, so a request by path)."""
    query: list[tuple[str, Any]] = [("container", CONTAINER), ("timestamps", "true"), ("limitBytes", limit)]
    if since:
        query.append(("sinceTime", since))
    return client.request(
        f"reading the log of pod {pod}",
        "GET",
        "/api/v1/namespaces/{namespace}/pods/{name}/log",
        path_params={"namespace": client.namespace, "name": pod},
        query=query,
        accept="text/plain",
    )


_TIMESTAMP = re.compile(rb"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$")


def timestamp_ns(text: bytes) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 (nano) timestamp as the kubelet writes them; None if not one."""
    match = _TIMESTAMP.match(text)
    if not match:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = (match.group(7) or b"").ljust(9, b"0")
    zone = match.group(8)
    offset = 0
    if zone != b"Z":
        sign = 1 if zone[:1] == b"+" else -1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    seconds = int(dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC).timestamp()) - offset
    return seconds * 1_000_000_000 + int(fraction)


def new_log_lines(raw: bytes, cursor: dict[str, Any], *, limit: int) -> tuple[bytes, dict[str, Any]]:
    """Lines of a timestamped log past the cursor, and the cursor after them.

    The cursor is {"pod", "since" (the last line's timestamp text), "since_ns", "skip" (lines seen with
    exactly that timestamp)}. A response cut at `limit` bytes drops its incomplete last line (read again next time).
    """
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    if complete:
        lines = lines[:-1]
    elif len(raw) >= limit and len(lines) > 1:
        lines = lines[:-1]  # cut by limitBytes: the rest of this line comes next time
        complete = True
    since_ns = int(cursor.get("since_ns") or 0)
    skip = int(cursor.get("skip") or 0)
    seen_at_since = 0
    out = bytearray()
    new_cursor = dict(cursor)
    for index, line in enumerate(lines):
        stamp, _, content = line.partition(b" ")
        ns = timestamp_ns(stamp)
        if ns is None:  # not a timestamped line (should not happen): keep it, it cannot be placed
            ns, content = since_ns, line
        if ns < since_ns:
            continue
        if ns == since_ns and cursor.get("since"):
            seen_at_since += 1
            if seen_at_since <= skip:
                continue
        last_line = index == len(lines) - 1
        out += content + (b"" if last_line and not complete else b"\n")
        if ns == int(new_cursor.get("since_ns") or 0) and new_cursor.get("since"):
            new_cursor["skip"] = int(new_cursor.get("skip") or 0) + 1
        else:
            new_cursor.update(since=stamp.decode("ascii", "replace"), since_ns=ns, skip=1)
    return bytes(out), new_cursor
