"""Uploads of declared outputs to an object store through the temporary URL the assignment carries
(docs/data.md): Swift's `tempurl`, one prefix per attempt. The project's credentials never reach the execution.

The bytes are hashed (SHA-256 for the manifest, MD5 to check the store's ETag) while they are sent. A store
that is down, slow or answers 5xx is retried with backoff for UPLOAD_RETRY_SECONDS; what is refused outright
(an expired or wrong signature) is reported at once. Standard library only, Python 3.8+.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import ssl
import threading
import time
from urllib.parse import quote, urlsplit

UPLOAD_CHUNK = 1024 * 1024
UPLOAD_RETRY_SECONDS = 900  # how long one file is retried through an outage of the store
UPLOAD_TIMEOUT_SECONDS = 60  # one socket operation
UPLOAD_MAX_BYTES = 5 * 1024**3  # Swift's largest single object (larger needs segments: not yet)
UPLOAD_THREADS = 8  # files sent at once (many small outputs are bound by round trips, not bytes)
_local = threading.local()  # each uploading thread keeps one connection open to the store (keep-alive)


class OutputError(Exception):
    """One output that cannot be kept; the message is the reason the manifest gives."""


class _Retry(Exception):
    """A failure worth another try (the store unreachable, 5xx, a cut connection)."""


def store_url(store: dict, name: str) -> str:
    """The temporary URL of one object: the attempt's prefix URL, the file's name, the signed query."""
    return "%s%s?%s" % (store.get("url") or "", quote(name), store.get("query") or "")


def put_file(fd: int, url: str, retry_seconds: float = UPLOAD_RETRY_SECONDS):
    """PUT the open file to `url`; (bytes, sha256 hex). Raises OutputError when it cannot be kept."""
    size = os.fstat(fd).st_size
    if size > UPLOAD_MAX_BYTES:
        raise OutputError("larger than the store's largest object (%d bytes)" % UPLOAD_MAX_BYTES)
    give_up, delay = time.monotonic() + retry_seconds, 1.0
    while True:
        try:
            return _put_once(fd, url, size)
        except _Retry as exc:
            if time.monotonic() + delay > give_up:
                raise OutputError("could not be uploaded (the store kept failing): %s" % exc) from None
            time.sleep(delay)
            delay = min(delay * 2, 30.0)


def _connection(parts):
    """This thread's open connection to the store's host, made at its first use."""
    key = (parts.scheme, parts.netloc)
    conn = getattr(_local, "connections", {}).get(key)
    if conn is None:
        if parts.scheme == "https":
            context = ssl.create_default_context()
            conn = http.client.HTTPSConnection(parts.netloc, timeout=UPLOAD_TIMEOUT_SECONDS, context=context)
        elif parts.scheme == "http":
            conn = http.client.HTTPConnection(parts.netloc, timeout=UPLOAD_TIMEOUT_SECONDS)
        else:
            raise OutputError("the store's URL is not http(s)")
        _local.connections = {**getattr(_local, "connections", {}), key: conn}
    return conn


def _drop_connection(parts) -> None:
    conn = getattr(_local, "connections", {}).pop((parts.scheme, parts.netloc), None)
    if conn is not None:
        conn.close()


def _put_once(fd: int, url: str, size: int):
    parts = urlsplit(url)
    conn = _connection(parts)
    sha, md5, sent = hashlib.sha256(), hashlib.md5(), 0
    try:
        conn.putrequest("PUT", parts.path + "?" + parts.query, skip_accept_encoding=True)
        conn.putheader("Content-Length", str(size))
        conn.putheader("Content-Type", "application/octet-stream")
        conn.endheaders()
        os.lseek(fd, 0, os.SEEK_SET)
        while sent < size:
            chunk = os.read(fd, min(UPLOAD_CHUNK, size - sent))
            if not chunk:
                _drop_connection(parts)  # the request is cut short: the connection cannot be reused
                raise OutputError("it shrank while it was being uploaded")
            sha.update(chunk)
            md5.update(chunk)
            conn.send(chunk)
            sent += len(chunk)
        response = conn.getresponse()
        response.read()
        if response.will_close:
            _drop_connection(parts)
    except (OSError, socket.timeout, http.client.HTTPException) as exc:
        _drop_connection(parts)
        raise _Retry(str(exc) or type(exc).__name__) from None
    status = response.status
    if status in (200, 201):
        etag = (response.getheader("Etag") or "").strip('"')
        if etag and etag != md5.hexdigest():
            raise _Retry("the store's checksum (ETag) differs from the bytes sent")
        return sent, sha.hexdigest()
    if status in (408, 429) or status >= 500:
        raise _Retry("the store answered HTTP %d" % status)
    if status in (401, 403):
        raise OutputError("the store refused the upload (HTTP %d): its upload URL expired or is not valid" % status)
    raise OutputError("the store refused the upload (HTTP %d)" % status)
