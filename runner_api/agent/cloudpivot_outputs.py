"""Declared outputs (docs/data.md): after the program ends, whatever the outcome, the files the task declared are
copied to the store the assignment names, SHA-256 computed while copying, and a manifest is reported as the
`outputs` event. A file that cannot be kept is listed as missing with the reason; it never changes the exit code.

Standard library only, Python 3.8+.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat
from concurrent.futures import ThreadPoolExecutor

try:  # run as a script or from the zipapp (its sibling modules beside it), or imported as a package module
    from cloudpivot_common import read_json
    from cloudpivot_upload import UPLOAD_THREADS, OutputError, put_file, store_url
except ImportError:  # pragma: no cover - import path of the tests
    from runner_api.agent.cloudpivot_common import read_json
    from runner_api.agent.cloudpivot_upload import UPLOAD_THREADS, OutputError, put_file, store_url

OUTPUT_MAX_FILES = 1000  # the manifest must fit one event (256 KiB of JSON): files and misses alike
OUTPUT_MAX_LISTED = 120_000  # characters of names a manifest may list (with sizes and checksums: < 256 KiB)
OUTPUT_MAX_NAME = 200
OUTPUT_CHUNK = 1024 * 1024
OUTPUTS_FILE = "outputs.json"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _name_problem(name: str) -> str:
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") for part in parts):
        return "not a path inside the work directory"
    if len(name) > OUTPUT_MAX_NAME:
        return "its name is longer than %d characters" % OUTPUT_MAX_NAME
    return ""


def outputs_match(workdir: str, declared: list):
    """The files the declared outputs match, as [(stored name, path)], each name once, and the misses.

    A pattern is a glob relative to the work directory; a directory it matches stands for every file under
    it. Symbolic links are never followed out of the work directory (the copy checks where the file is)."""
    root = os.path.realpath(workdir)
    found, missing, names, room, over = [], [], set(), OUTPUT_MAX_LISTED, []
    for entry in declared or []:
        pattern, to = str(entry.get("path") or ""), str(entry.get("to") or "").strip("/")
        problem = _name_problem(pattern.replace("*", "x").replace("?", "x")) or (to and _name_problem(to))
        if problem:
            missing.append({"name": pattern, "reason": problem})
            continue
        paths = []
        for path in sorted(glob.glob(os.path.join(glob.escape(root), pattern))):
            if os.path.isdir(path) and not os.path.islink(path):
                for top, dirs, files in os.walk(path):
                    dirs.sort()
                    paths += [os.path.join(top, name) for name in sorted(files)]
            else:
                paths.append(path)
        if not paths:
            missing.append({"name": pattern, "reason": "no file matches it in the work directory"})
        for path in paths:
            relative = os.path.relpath(path, root)
            name = to + "/" + relative if to else relative
            if name in names:
                continue
            names.add(name)
            problem = _name_problem(name)
            if len(found) + len(missing) >= OUTPUT_MAX_FILES or room < len(name):
                over.append(name)  # listed once, below: the manifest has no room for each
            elif problem:
                missing.append({"name": name[:OUTPUT_MAX_NAME], "reason": problem})
            else:
                found.append((name, path))
            room -= len(name)
    if over:
        why = "%d more files are not kept: one manifest lists at most %d files" % (len(over), OUTPUT_MAX_FILES)
        missing.append({"name": over[0], "reason": why})
    return found, missing


def _open_checked(path: str, root: str, owner=None) -> int:
    """The file opened for reading, once it is known to be a regular file inside the work directory (and the
    program's account's, when `owner` is given: a root copier must not pick up what the account could only
    link to). Raises OutputError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise OutputError("cannot be read: %s" % (exc.strerror or exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OutputError("not a regular file")
        if owner is not None and info.st_uid != owner:
            raise OutputError("not owned by the program's account")
        try:
            real = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            real = os.path.realpath(path)
        if not _inside(real, os.path.realpath(root)):
            raise OutputError("it leads outside the work directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


def output_copy(path: str, root: str, destination: str, owner=None):
    """Copy one file to `destination` (atomically: a temporary name, then renamed), hashing as it goes.

    Returns (bytes, sha256 hex); raises OutputError."""
    fd = _open_checked(path, root, owner)
    try:
        digest, size = hashlib.sha256(), 0
        tmp = "%s.part-%d" % (destination, os.getpid())
        try:
            os.makedirs(os.path.dirname(destination), mode=0o700, exist_ok=True)
            with os.fdopen(os.dup(fd), "rb") as source, open(tmp, "wb") as target:
                while True:
                    chunk = source.read(OUTPUT_CHUNK)
                    if not chunk:
                        break
                    digest.update(chunk)
                    target.write(chunk)
                    size += len(chunk)
            os.replace(tmp, destination)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise OutputError("could not be stored: %s" % (exc.strerror or exc)) from None
        return size, digest.hexdigest()
    finally:
        os.close(fd)


def _kept(name: str, keep):
    """(file entry, None) once `keep()` stored the file, or (None, missing entry) with the reason."""
    try:
        size, sha = keep()
    except OutputError as exc:
        return None, {"name": name, "reason": str(exc)}
    return {"name": name, "bytes": size, "sha256": sha}, None  # the server names the object itself


def upload_all(found: list, store: dict, workdir: str, owner=None) -> list:
    """Upload the files to the object store, UPLOAD_THREADS at a time; results in the order of `found`."""

    def upload(name: str, path: str):
        fd = _open_checked(path, workdir, owner)
        try:
            return put_file(fd, store_url(store, name))
        finally:
            os.close(fd)

    with ThreadPoolExecutor(max_workers=UPLOAD_THREADS) as pool:
        return list(pool.map(lambda item: _kept(item[0], lambda: upload(*item)), found))


def collect_outputs(workdir: str, outputs: dict, owner=None) -> dict:
    """Copy the declared outputs to the assignment's store target; return the manifest (the `outputs` event).

    The manifest: {"files": [{name, bytes, sha256, ref}], "missing": [{name, reason}], "complete", "reason"}."""
    store = (outputs or {}).get("store") or {}
    files, missing = [], []
    try:
        found, missing = outputs_match(workdir, (outputs or {}).get("declared") or [])
    except OSError as exc:
        found, missing = [], [{"name": "*", "reason": "the work directory cannot be read: %s" % exc}]
    if found and store.get("kind") not in ("directory", "swift"):
        why = "this host program cannot write to a %r store" % store.get("kind")
        missing += [{"name": name, "reason": why} for name, _ in found]
        found = []
    if store.get("kind") == "swift":
        results = upload_all(found, store, workdir, owner)
    else:
        results = [
            _kept(name, lambda n=name, p=path: output_copy(p, workdir, os.path.join(str(store.get("path")), n), owner))
            for name, path in found
        ]
    for kept, lost in results:
        files += [kept] if kept else []
        missing += [lost] if lost else []
    reason = ""
    if missing:
        reason = "%d of %d outputs not kept: %s" % (len(missing), len(missing) + len(files), missing[0]["reason"])
    return {"files": files, "missing": missing, "complete": not missing, "reason": reason[:2000]}


def outputs_event(directory: str, assignment: dict):
    """The `outputs` event's data for an attempt that declared outputs (None otherwise): the supervisor's
    manifest, or why there is none (it ended before it finished collecting)."""
    if not (assignment.get("outputs") or {}).get("declared"):
        return None
    try:
        manifest = read_json(os.path.join(directory, OUTPUTS_FILE))
    except ValueError:
        manifest = None
    if isinstance(manifest, dict):
        return manifest
    why = "the outputs were not collected: the supervisor ended before it had copied them"
    return {"files": [], "missing": [], "complete": False, "reason": why}
