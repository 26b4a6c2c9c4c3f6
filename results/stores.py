"""Where outputs are kept: one interface, one kind today (docs/data.md).

The contract every store fills, so that the host agent, the VM Runner and a later object store plug into it:

1. `target(attempt)`: what the assignment tells the execution, under `outputs.store`. The execution writes
   the files there itself, computing SHA-256 as it goes, and reports the manifest (`outputs` event). The
   server never relays the bytes.
   - `{"kind": "directory", "path": "<RESULTS_DIR>/<attempt>"}`: the embedded default. The `local` cloud's
     programs run on the CloudPivot host, so the host agent copies into a directory the server reads.
   - Next, `{"kind": "swift", "url": "https://…/v1/AUTH_p/container/cp/<attempt>/", "query":
     "temp_url_sig=…&temp_url_expires=…&temp_url_prefix=cp/<attempt>/"}`: a prefix-scoped Swift temporary
     URL, signed per attempt and short-lived; the Runner PUTs each file to `url + name + "?" + query`. The
     project's credentials never reach the execution.
2. `open(file)`: the bytes of a stored file, for the download view (a directory store serves them itself; an
   object store answers `link(file)` with a temporary GET URL instead and the bytes never pass CloudPivot).
3. `discard(attempt)`: remove what the store keeps of an attempt (retention).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import IO, Any, Protocol

from django.conf import settings

from results.choices import StoreKind
from tasks.models import Attempt


class OutputStore(Protocol):
    kind: str

    def target(self, attempt: Attempt) -> dict[str, Any]: ...
    def open(self, attempt_name: str, ref: str) -> IO[bytes]: ...
    def discard(self, attempt_name: str) -> None: ...


class DirectoryStore:
    """Files under `root/<attempt>/<name>` on the CloudPivot host (the embedded default)."""

    kind = StoreKind.DIRECTORY

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def location(self, attempt_name: str) -> Path:
        if "/" in attempt_name or attempt_name in ("", ".", ".."):
            raise ValueError(f"not an attempt name: {attempt_name!r}")
        return self.root / attempt_name

    def target(self, attempt: Attempt) -> dict[str, Any]:
        return {"kind": self.kind.value, "path": str(self.location(attempt.external_name))}

    def path(self, attempt_name: str, ref: str) -> Path:
        """The file of `ref` (a relative name the execution reported), never outside the attempt's directory."""
        base = self.location(attempt_name).resolve()
        path = (base / ref).resolve()
        if not path.is_relative_to(base) or path == base:
            raise FileNotFoundError(ref)
        return path

    def open(self, attempt_name: str, ref: str) -> IO[bytes]:
        return self.path(attempt_name, ref).open("rb")

    def discard(self, attempt_name: str) -> None:
        shutil.rmtree(self.location(attempt_name), ignore_errors=True)


def store_for_attempt(attempt: Attempt) -> OutputStore:
    """The store an attempt's outputs go to. Every cloud that keeps outputs today is `local` (the other
    clouds refuse `outputs` at submission): the directory store. An object store per connection is next."""
    return DirectoryStore(settings.RESULTS_DIR)


def store_of_kind(kind: str) -> OutputStore:
    if kind == StoreKind.DIRECTORY:
        return DirectoryStore(settings.RESULTS_DIR)
    raise LookupError(f"no output store of kind {kind!r}")


def store_target(attempt: Attempt) -> dict[str, Any]:
    """The assignment's `outputs.store` for the attempt (handed to tasks.services.runner_reports)."""
    return store_for_attempt(attempt).target(attempt)
