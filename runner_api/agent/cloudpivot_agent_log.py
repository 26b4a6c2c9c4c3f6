"""The host agent's diagnostics on its standard error, and agent.log rotated by size. Standard library only.

A worker that launches the agent (clusters/backends/local.py) points the agent's standard output and error
at the runs directory's agent.log, opened for appending, and nothing else ever trims it. So the agent rotates
it itself: once a line would take it past `max_bytes`, agent.log becomes agent.log.1 (agent.log.1 becomes
.2, and so on; the one past `keep` goes), and a fresh agent.log takes over the agent's standard output and
error. Only a standard error that *is* agent.log is rotated: under a service manager (a pipe, the journal, a
file of the operator's) the manager keeps the log. Only the agent rotates, never a supervisor (a forked
copy of it), and the supervisors of programs started before a rotation write their rare lines to the
rotated file. A rotation that fails (a full disk) is tried again at the next line; the line is written anyway.
"""

from __future__ import annotations

import os
import sys

try:  # run as a script or from the zipapp (its sibling modules beside it), or imported as a package module
    from cloudpivot_common import utc_stamp
except ImportError:  # pragma: no cover - import path of the tests
    from runner_api.agent.cloudpivot_common import utc_stamp

MAX_BYTES = 10 * 1024 * 1024
KEEP = 3  # agent.log.1 … agent.log.3 besides agent.log: at most 40 MB in all
_rotation = {}  # path, max_bytes, keep, pid (the agent's: its forked supervisors never rotate), foreign


def log(message: str) -> None:
    line = "cloudpivot-agent: %s %s\n" % (utc_stamp(), message)
    try:
        if _rotation.get("pid") == os.getpid():
            _rotate_if_due(len(line.encode()))
        sys.stderr.write(line)
        sys.stderr.flush()
    except OSError:  # agent.log on a full disk: the line is lost, the agent goes on
        pass


def rotate_at(path: str, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
    """From now on, this process rotates `path` (when its standard error is that file) before it passes max_bytes."""
    _rotation.update(path=path, max_bytes=max(1, max_bytes), keep=max(1, keep), pid=os.getpid(), foreign=None)


def _rotate_if_due(incoming: int) -> None:
    err = os.fstat(2)
    if err.st_size + incoming <= _rotation["max_bytes"] or _rotation["foreign"] == (err.st_dev, err.st_ino):
        return
    path = _rotation["path"]
    try:
        here = os.stat(path)
    except FileNotFoundError:
        here = None
    if here is None or (here.st_dev, here.st_ino) != (err.st_dev, err.st_ino):
        _rotation["foreign"] = (err.st_dev, err.st_ino)  # not agent.log: not ours to rotate
        return
    for number in range(_rotation["keep"] - 1, 0, -1):
        older = "%s.%d" % (path, number)
        if os.path.exists(older):
            os.replace(older, "%s.%d" % (path, number + 1))
    os.replace(path, path + ".1")
    fresh = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for fd in (1, 2):
            if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) == (err.st_dev, err.st_ino):
                os.dup2(fresh, fd)
    finally:
        os.close(fresh)
