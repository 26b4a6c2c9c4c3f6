"""Where outputs are kept: one interface, two kinds (docs/data.md).

The contract every store fills, so that the host agent, the VM Runner and a later object store plug into it:

1. `target(attempt)`: what the assignment tells the execution, under `outputs.store`. The execution writes
   the files there itself, computing SHA-256 as it goes, and reports the manifest (`outputs` event). The
   server never relays the bytes.
   - `{"kind": "directory", "path": "<RESULTS_DIR>/<attempt>"}`: the embedded default. The `local` cloud's
     programs run on the CloudPivot host, so the host agent copies into a directory the server reads.
   - `{"kind": "swift", "url": "https://…/v1/AUTH_p/container/cp/<attempt>/", "query":
     "temp_url_sig=…&temp_url_expires=…&temp_url_prefix=cp/<attempt>/"}`: a prefix-scoped Swift temporary
     URL, signed per attempt; the host program PUTs each file to `url + name + "?" + query`. The project's
     credentials never reach the execution.
2. `link(ref, name)`: an object store's temporary GET URL (the bytes go from the store to the person); None for
   the directory store, whose files the download view serves with `open(attempt, ref)`.
3. `discard(attempt)`: remove what the store keeps of an attempt (retention).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import IO, Any, Protocol

from django.conf import settings

from clusters.backends import get_backend
from results.choices import StoreKind
from tasks.models import Attempt


class OutputStore(Protocol):
    kind: str

    def target(self, attempt: Attempt) -> dict[str, Any]: ...
    def location(self, attempt_name: str) -> str: ...
    def ref(self, attempt_name: str, name: str) -> str: ...
    def link(self, ref: str, name: str) -> str | None: ...
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

    def ref(self, attempt_name: str, name: str) -> str:
        return name

    def link(self, ref: str, name: str) -> str | None:
        return None  # served by CloudPivot's download view (results/views.py), on the host that holds the files

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


class ObjectStore:
    """A cloud's object store (its backend's `output_store()`: Swift on OpenStack), written through temporary
    URLs. An attempt's files are the objects under `cp/<attempt>/`; people download them from the store."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.kind = store.kind

    @staticmethod
    def prefix(attempt_name: str) -> str:
        return f"cp/{attempt_name}/"

    def target(self, attempt: Attempt) -> dict[str, Any]:
        """Signed for the program's time limit (else the longest), plus the time the upload may take."""
        spec = attempt.task.normalized or {}
        running = min(int(spec.get("timeout_seconds") or MAX_RUN_SIGNED), MAX_RUN_SIGNED)
        return self.store.upload_target(self.prefix(attempt.external_name), running + settings.RESULTS_UPLOAD_SECONDS)

    def location(self, attempt_name: str) -> str:
        return self.store.object_url(self.prefix(attempt_name))

    def ref(self, attempt_name: str, name: str) -> str:
        return self.prefix(attempt_name) + name

    def link(self, ref: str, name: str) -> str:
        return self.store.download_url(ref, settings.RESULTS_LINK_SECONDS, filename=name.rsplit("/", 1)[-1])

    def open(self, attempt_name: str, ref: str) -> IO[bytes]:
        raise LookupError("an object store serves its files itself (link)")

    def discard(self, attempt_name: str) -> None:
        self.store.delete_prefix(self.prefix(attempt_name))


MAX_RUN_SIGNED = 7 * 24 * 3600  # an upload URL is never signed for longer than a week of running


def store_for_attempt(attempt: Attempt) -> OutputStore:
    """The store an attempt's outputs go to: its cloud's object store where it has one, else the directory
    store (the `local` cloud: the server host is the execution host)."""
    store = get_backend(attempt.task.connection).output_store()
    return ObjectStore(store) if store is not None else DirectoryStore(settings.RESULTS_DIR)


def store_of(attempt: Attempt, kind: str) -> OutputStore:
    """The store a manifest names (download, retention): LookupError when the attempt's cloud no longer has it."""
    if kind == StoreKind.DIRECTORY:
        return DirectoryStore(settings.RESULTS_DIR)
    store = store_for_attempt(attempt)
    if store.kind != kind:
        raise LookupError(f"the {kind} store of these outputs is no longer the connection's")
    return store


def store_target(attempt: Attempt) -> dict[str, Any]:
    """The assignment's `outputs.store` for the attempt (handed to tasks.services.runner_reports)."""
    return store_for_attempt(attempt).target(attempt)
