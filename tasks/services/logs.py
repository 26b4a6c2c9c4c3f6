"""The stored log: appended by offset (exactly once), read by offset (resumable)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cloudpivot import realtime
from cloudpivot.exceptions import Conflict
from tasks.models import Attempt, LogChunk, LogStream, Task
from tasks.services.lifecycle import event_append, task_lock

READ_LIMIT_BYTES = 1024 * 1024


def log_append(*, attempt: Attempt, stream: str, offset: int, data: bytes) -> int:
    """Append bytes at the stream's current length; return the new length.

    A resend of bytes already stored is acknowledged and ignored; a chunk that would leave
    a gap is refused with the offset the server expects. Bytes past the task's cap are
    counted but not kept (one `log_truncated` event says so).
    """
    field = "log_stdout_bytes" if stream == LogStream.STDOUT else "log_stderr_bytes"
    with transaction.atomic():
        attempt = Attempt.objects.select_for_update().select_related("task").get(pk=attempt.pk)
        if attempt.is_closed or attempt.number != attempt.task.attempts_count:
            raise Conflict(f"attempt {attempt.external_name} is closed; stop reporting", code="attempt_closed")
        length = getattr(attempt, field)
        if offset > length:
            raise Conflict(
                f"{stream} is {length} bytes long; send from there",
                code="offset_mismatch",
                errors=[{"field": "offset", "message": f"expected {length}"}],
                extra={"expected_offset": length},
            )
        data = data[length - offset :]
        if not data:
            return length
        keep = max(0, min(len(data), settings.LOG_MAX_BYTES_PER_TASK - attempt.log_bytes))
        if keep:
            LogChunk.objects.create(
                task_id=attempt.task_id,
                attempt=attempt,
                stream=stream,
                offset=length,
                position=attempt.log_bytes,
                data=data[:keep],
            )
        if keep < len(data) and not attempt.log_dropped_bytes:
            task = task_lock(attempt.task_id)
            event_append(
                task=task,
                type="log_truncated",
                message=f"the log reached its cap of {settings.LOG_MAX_BYTES_PER_TASK} bytes; later output is not kept",
                data={"attempt": attempt.number},
            )
        if keep:
            task_id, position = attempt.task_id, attempt.log_bytes + keep
            transaction.on_commit(lambda: realtime.ring_log(task_id=task_id, position=position))
        setattr(attempt, field, length + len(data))
        Attempt.objects.filter(pk=attempt.pk).update(
            **{
                field: length + len(data),
                "log_bytes": attempt.log_bytes + keep,
                "log_dropped_bytes": attempt.log_dropped_bytes + len(data) - keep,
                "last_heartbeat_at": timezone.now(),  # a Runner that sends logs is alive
            }
        )
        return length + len(data)


def log_append_next(*, attempt: Attempt, stream: str, data: bytes) -> int:
    """Append bytes copied from the cloud (no Runner): at the end of the stream, whatever its length now."""
    field = "log_stdout_bytes" if stream == LogStream.STDOUT else "log_stderr_bytes"
    length = Attempt.objects.values_list(field, flat=True).get(pk=attempt.pk)
    return log_append(attempt=attempt, stream=stream, offset=length, data=data)


def log_read(
    *,
    task: Task,
    attempt_number: int | None = None,
    stream: str | None = None,
    offset: int = 0,
    limit: int = READ_LIMIT_BYTES,
) -> dict[str, Any]:
    """Up to `limit` bytes from `offset` of one attempt's log (the latest by default).

    Without `stream`, both streams interleaved in arrival order, with offsets counted
    across both; with `stream`, that stream alone with its own offsets.
    """
    attempts = task.attempts.all()
    attempt = attempts.filter(number=attempt_number).first() if attempt_number else attempts.order_by("-number").first()
    if attempt is None:
        return {
            "attempt": attempt_number,
            "stream": stream,
            "offset": offset,
            "next_offset": offset,
            "data": "",
            "complete": task.is_terminal,
        }
    key = "offset" if stream else "position"
    chunks = LogChunk.objects.filter(attempt=attempt)
    if stream:
        chunks = chunks.filter(stream=stream)
    first = chunks.filter(**{f"{key}__lte": offset}).order_by(f"-{key}").values_list(key, flat=True).first()
    start = first if first is not None else offset
    out = bytearray()
    next_offset = offset
    for begin, data in chunks.filter(**{f"{key}__gte": start}).order_by(key).values_list(key, "data").iterator():
        data = bytes(data)
        piece = data[max(0, offset - begin) :] if begin < offset else data
        if begin + len(data) <= offset:
            continue
        room = limit - len(out)
        out += piece[:room]
        next_offset = max(offset, begin) + min(len(piece), room)
        if len(out) >= limit:
            break
    return {
        "attempt": attempt.number,
        "stream": stream or "all",
        "offset": offset,
        "next_offset": next_offset,
        "data": out.decode("utf-8", errors="replace"),
        "complete": attempt.is_closed and len(out) < limit,
    }
