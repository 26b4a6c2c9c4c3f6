"""Data staged in before the program starts (docs/data.md, `data` of kind `object`): each object under a prefix
of the project's object store is fetched through the prefix-scoped temporary GET URL the assignment carries, to
the path the task names. The project's credentials never reach the execution.

MD5 is checked against the store's ETag while the bytes arrive; a failed fetch is retried with backoff; what
cannot be staged fails the attempt in words before the program runs. Standard library only, Python 3.8+.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import time
import urllib.request
from urllib.parse import quote

STAGE_CHUNK = 1024 * 1024
STAGE_RETRY_SECONDS = 300
STAGE_TIMEOUT_SECONDS = 60


class StageError(Exception):
    """What cannot be staged in; the message is the attempt's error."""


def stage_in(entries) -> str:
    """Fetch every entry's files; "" when all are in place, else why not (the first failure)."""
    for entry in entries or []:
        if entry.get("error"):
            return "%s: %s" % (entry.get("field") or "data", entry["error"])
        try:
            for item in entry.get("files") or []:
                _fetch(entry, item)
        except StageError as exc:
            return "%s: could not be staged in: %s" % (entry.get("field") or "data", exc)
    return ""


def _target(root: str, name: str) -> str:
    parts = [part for part in name.split("/") if part]
    if not parts or any(part in (".", "..") for part in parts):
        raise StageError("the object name %r is not a path inside %s" % (name, root))
    return os.path.join(root, *parts)


def _fetch(entry: dict, item: dict) -> None:
    destination = _target(entry["path"], item["relative"])
    url = "%s%s?%s" % (entry["url"], quote(item["name"][len(entry["prefix"]) :]), entry["query"])
    give_up, delay = time.monotonic() + STAGE_RETRY_SECONDS, 1.0
    while True:
        try:
            return _fetch_once(url, destination, item)
        except (OSError, socket.timeout, http.client.HTTPException) as exc:
            status = getattr(exc, "code", None)
            if status in (401, 403, 404) or time.monotonic() + delay > give_up:
                raise StageError("%s (%s)" % (item["relative"], exc)) from None
            time.sleep(delay)
            delay = min(delay * 2, 30.0)


def _fetch_once(url: str, destination: str, item: dict) -> None:
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    md5, size, tmp = hashlib.md5(), 0, destination + ".part"
    with urllib.request.urlopen(url, timeout=STAGE_TIMEOUT_SECONDS) as answer, open(tmp, "wb") as out:
        etag = (answer.headers.get("Etag") or "").strip('"')
        while True:
            chunk = answer.read(STAGE_CHUNK)
            if not chunk:
                break
            md5.update(chunk)
            out.write(chunk)
            size += len(chunk)
    if size != item.get("bytes", size) or (etag and etag != md5.hexdigest()):
        os.unlink(tmp)
        raise OSError("the bytes that arrived differ from the store's (size or checksum)")
    os.replace(tmp, destination)
