"""The stored log: appended by offset (exactly once), read by offset (resumable)."""

from __future__ import annotations

import codecs
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from cloudpivot import realtime
from cloudpivot.exceptions import Conflict
from clusters.backends.base import AttemptRef, BackendError
from tasks.models import Attempt, LogChunk, LogStream, Task
from tasks.services.lifecycle import attempt_refuse_if_closed, event_append, lock_task_and_attempt
from tasks.services.secret_delivery import log_mask, log_mask_across, log_mask_values

logger = logging.getLogger(__name__)
READ_LIMIT_BYTES = 1024 * 1024


def log_append(*, attempt: Attempt, stream: str, offset: int, data: bytes) -> int:
    """Append a Runner's bytes at the stream's current length; return the new length.

    A resend of bytes already stored is acknowledged and ignored; a chunk that would leave
    a gap is refused with the offset the server expects. Bytes past the task's cap are
    counted but not kept (one `log_truncated` event says so).
    """
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        attempt_refuse_if_closed(attempt, task)
        length = getattr(attempt, _LENGTH[stream])
        if offset > length:
            raise Conflict(
                f"{stream} is {length} bytes long; send from there",
                code="offset_mismatch",
                errors=[{"field": "offset", "message": f"expected {length}"}],
                extra={"expected_offset": length},
            )
        if log_append_locked(task=task, attempt=attempt, stream=stream, offset=offset, data=data):
            log_counters_save(attempt, last_heartbeat_at=timezone.now())  # a Runner that sends logs is alive
        return getattr(attempt, _LENGTH[stream])


def log_append_locked(
    *, task: Task, attempt: Attempt, stream: str, offset: int, data: bytes, chunks: list[LogChunk] | None = None
) -> bool:
    """The bytes of `data` past the stream's length, appended to the locked attempt (counters in memory).

    With `chunks`, the new LogChunk rows are collected there for one bulk insert by the caller (a batch of
    reports); a piece that starts past the end is skipped: the batch's answer says where to resend from.
    False if nothing was added.
    """
    length = getattr(attempt, _LENGTH[stream])
    if offset > length:
        return False
    return _store(task, attempt, stream, data[length - offset :], chunks)


def log_append_copied(
    *, attempt: Attempt, pieces: list[Any], cursor: dict[str, Any], since: dict[str, Any]
) -> dict[str, Any]:
    """Store what was copied from a cloud's own log (no Runner) and where copying stands, in one transaction.

    The pieces were read from `since`; if the locked attempt's cursor is no longer there, another pass (two
    overlapping reconcile passes, or one whose worker was killed and replaced) copied them meanwhile, and
    they are dropped: storing them would append the same output a second time. Returns the stored cursor.
    """
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        if (attempt.log_cursor or {}) != since:
            return attempt.log_cursor or {}
        for piece in pieces:
            _store(task, attempt, piece.stream, piece.data)
        log_counters_save(attempt, log_cursor=cursor)
    return cursor


def log_copy_from_cloud(backend: Any, attempt: Attempt, ref: AttemptRef) -> None:
    """Copy what the cloud holds of the log (backends without a Runner), so it outlives the pod or VM."""
    since = attempt.log_cursor or {}
    try:
        pieces, cursor = backend.fetch_logs(ref, since)
    except BackendError as exc:
        logger.info("log copy for %s failed: %s", attempt, exc.message)
        return
    if pieces or cursor != since:
        attempt.log_cursor = log_append_copied(attempt=attempt, pieces=pieces, cursor=cursor, since=since)


_LENGTH = {LogStream.STDOUT: "log_stdout_bytes", LogStream.STDERR: "log_stderr_bytes"}


def _store(task: Task, attempt: Attempt, stream: str, data: bytes, chunks: list[LogChunk] | None = None) -> bool:
    """Add bytes at the end of one stream of the locked attempt (counters in memory); False if there were none."""
    if not data:
        return False
    length = getattr(attempt, _LENGTH[stream])
    received = len(data)  # the stream's offsets count what the program wrote, masked or not
    secrets = log_mask_values(task)
    if secrets:  # project secrets the program printed: masked (never longer), also across two pieces
        data = _mask_across_pieces(attempt, stream, data, secrets, chunks)
        data = log_mask(data, secrets)
    keep = max(0, min(len(data), settings.LOG_MAX_BYTES_PER_TASK - attempt.log_bytes))
    if keep:
        chunk = LogChunk(
            task_id=task.pk, attempt=attempt, stream=stream, offset=length, position=attempt.log_bytes, data=data[:keep]
        )
        if chunks is None:
            chunk.save()
        else:
            chunks.append(chunk)
        realtime.ring_log_on_commit(task_id=task.pk, position=attempt.log_bytes + keep)
    if keep < len(data) and not attempt.log_dropped_bytes:
        event_append(
            task=task,
            type="log_truncated",
            data={"attempt": attempt.number},
            message=f"the log reached its cap of {settings.LOG_MAX_BYTES_PER_TASK} bytes; later output is not kept",
        )
    setattr(attempt, _LENGTH[stream], length + received)
    attempt.log_bytes += keep
    attempt.log_dropped_bytes += len(data) - keep
    return True


def _mask_across_pieces(
    attempt: Attempt, stream: str, data: bytes, secrets: list[bytes], chunks: list[LogChunk] | None
) -> bytes:
    """Mask a value that began at the end of the stream's previous piece (rewritten in place, same length)."""
    previous = next((c for c in reversed(chunks or []) if c.attempt_id == attempt.pk and c.stream == stream), None)
    if previous is None:
        previous = LogChunk.objects.filter(attempt=attempt, stream=stream).order_by("-offset").first()
    keep = max(len(value) for value in secrets) - 1
    if previous is None or keep < 1:
        return data
    stored = bytes(previous.data)
    tail, data = log_mask_across(stored[-keep:], data, secrets)
    if tail != stored[-keep:]:
        previous.data = stored[: len(stored) - len(tail)] + tail
        if previous.pk:
            LogChunk.objects.filter(pk=previous.pk).update(data=previous.data)
    return data


def log_counters_save(attempt: Attempt, **extra: Any) -> None:
    Attempt.objects.filter(pk=attempt.pk).update(
        log_stdout_bytes=attempt.log_stdout_bytes,
        log_stderr_bytes=attempt.log_stderr_bytes,
        log_bytes=attempt.log_bytes,
        log_dropped_bytes=attempt.log_dropped_bytes,
        **extra,
    )


def log_read(
    *,
    task: Task,
    attempt_number: int | None = None,
    stream: str | None = None,
    offset: int = 0,
    limit: int = READ_LIMIT_BYTES,
    attempt: Attempt | None = None,
) -> dict[str, Any]:
    """Up to `limit` bytes from `offset` of one attempt's log (the latest by default, or `attempt` if given).

    Without `stream`, both streams interleaved in arrival order, with offsets counted
    across both; with `stream`, that stream alone with its own offsets.

    A follower polls this a few times a second: a read at or past the end asks the database for the
    attempt alone, and a read with news one query for its chunks (no server-side cursor).
    """
    attempt = attempt or log_attempt(task_id=task.pk, number=attempt_number)
    if attempt is None:
        return {
            "attempt": attempt_number,
            "stream": stream,
            "offset": offset,
            "next_offset": offset,
            "data": "",
            "complete": task.is_terminal,
        }
    # Every stored byte lies below the attempt's counters (updated in the transaction that stores the bytes).
    nothing = offset >= (getattr(attempt, _LENGTH[stream]) if stream else attempt.log_bytes)
    pieces, size, text, next_offset = [], 0, "", offset
    for room in (limit, limit + 8):  # a page smaller than one character reads that character whole
        if not nothing:
            pieces, size = _page(_chunks_from(attempt, stream, offset), offset=offset, limit=room)
        complete = attempt.is_closed and size < room
        text, next_offset = log_text(pieces, offset=offset, final=complete)
        if next_offset > offset or size < room:
            break
    return {
        "attempt": attempt.number,
        "stream": stream or "all",
        "offset": offset,
        "next_offset": next_offset,
        "data": text,
        "complete": complete,
    }


# What a read needs of the attempt (its row is wide: the spec of its execution, usage, cursors…).
_READ_FIELDS = ("id", "task_id", "number", "closed_at", "log_bytes", "log_stdout_bytes", "log_stderr_bytes")


def log_attempt(*, task_id: Any, number: int | None = None) -> Attempt | None:
    """The attempt whose log a read is about (number `number`, or the latest), with what log_read needs of it."""
    attempts = Attempt.objects.filter(task_id=task_id).only(*_READ_FIELDS)
    return attempts.filter(number=number).first() if number else attempts.order_by("-number").first()


# Rows per query: a follower's read is a few small chunks; a long read takes several pages of rows.
_ROWS_PER_QUERY = 200


def _chunks_from(attempt: Attempt, stream: str | None, offset: int) -> Any:
    """(where each chunk begins, its stream, its bytes) from the chunk holding `offset` on, in order:
    one query per _ROWS_PER_QUERY rows, the chunk holding `offset` found by a subquery of the same query."""
    key = "offset" if stream else "position"
    chunks = LogChunk.objects.filter(attempt_id=attempt.pk)
    if stream:
        chunks = chunks.filter(stream=stream)
    holding = chunks.filter(**{f"{key}__lte": offset}).order_by(f"-{key}").values(key)[:1]
    rows = chunks.filter(**{f"{key}__gte": Coalesce(Subquery(holding), Value(offset))}).order_by(key)
    rows = rows.values_list(key, "stream", "data")
    start = None
    while True:
        page = list(rows[:_ROWS_PER_QUERY] if start is None else rows.filter(**{f"{key}__gt": start})[:_ROWS_PER_QUERY])
        yield from page
        if len(page) < _ROWS_PER_QUERY:
            return
        start = page[-1][0]


def _page(rows: Any, *, offset: int, limit: int) -> tuple[list[tuple[int, str, bytes]], int]:
    """The stored bytes from `offset` on, at most `limit`: (where each piece begins, its stream, its bytes)."""
    pieces: list[tuple[int, str, bytes]] = []
    size = 0
    for begin, stream, data in rows:
        data = bytes(data)
        if begin + len(data) <= offset:
            continue
        piece = (data[offset - begin :] if begin < offset else data)[: limit - size]
        pieces.append((max(offset, begin), stream, piece))
        size += len(piece)
        if size >= limit:
            break
    return pieces, size


def log_text(pieces: list[tuple[int, str, bytes]], *, offset: int, final: bool) -> tuple[str, int]:
    """The text of a page of log bytes, and where the next page starts.

    A character is never cut in two (which would show as U+FFFD): each stream is decoded on its own
    (so a stderr chunk between the two halves of a stdout character does no harm), leading bytes in
    the middle of a character (a position picked by the caller) are skipped, and the bytes of a
    character whose end is not read yet (cut by the page, or not yet written) are left for the next
    page, unless the log is `final`: then they are what the program wrote, shown as U+FFFD. The next
    page starts where the text stops (`offset` itself when not even one character is whole yet).
    """
    end = pieces[-1][0] + len(pieces[-1][2]) if pieces else offset
    decoders: dict[str, Any] = {}
    pending_from: dict[str, int] = {}  # stream → where its undecoded bytes begin
    parts: list[tuple[int, str]] = []
    for index, (begin, stream, data) in enumerate(pieces):
        if index == 0 and offset > 0:
            skip = _continuation_bytes(data)
            begin, data = begin + skip, data[skip:]
        decoder = decoders.setdefault(stream, codecs.getincrementaldecoder("utf-8")(errors="replace"))
        parts.append((begin, decoder.decode(data)))
        held = len(decoder.getstate()[0])
        if not held:
            pending_from.pop(stream, None)
        elif held <= len(data):
            pending_from[stream] = begin + len(data) - held
        # else: still the same unfinished character as before; it began where pending_from says
    if final or not pending_from:
        return "".join(text for _, text in parts) + "".join(d.decode(b"", final=True) for d in decoders.values()), end
    cut = min(pending_from.values())
    if cut <= offset:  # not one whole character yet: wait for more bytes (or read a larger page)
        return "", offset
    return "".join(text for begin, text in parts if begin < cut), cut


def _continuation_bytes(data: bytes) -> int:
    """How many bytes at the start are the tail of a character that began before (at most 3)."""
    count = 0
    while count < min(3, len(data)) and 0x80 <= data[count] <= 0xBF:
        count += 1
    return count
