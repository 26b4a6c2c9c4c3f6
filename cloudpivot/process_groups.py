"""Child processes that each lead a process group of their own, and are stopped as whole groups.

`manage.py serve` starts every child (the web servers, the qcluster) this way. What a child starts in turn
(the qcluster's sentinel and workers, a master's web workers) stays in the child's group, so one killpg
reaches all of it, even once the child itself has died and its own children were left to init. Stopping
is SIGTERM (to the leader, or to what it left behind), a grace to finish what they do, then SIGKILL to
whatever is left of the group.
Ctrl-C in a terminal reaches serve alone (its group is the terminal's foreground group); serve passes it
on once, as SIGTERM, rather than every process getting SIGINT at once from the terminal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def start_group(command: list[str], **popen) -> subprocess.Popen:
    """`command` as the leader of a new process group (its pgid is its pid), in the caller's session."""
    return subprocess.Popen(command, process_group=0, **popen)


def signal_group(pgid: int, number: int) -> None:
    """Send `number` to every process in the group; a group with no process left is no error."""
    try:
        os.killpg(pgid, number)
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    """True while any live (non-zombie) process is in the group."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_groups(processes: list[subprocess.Popen], *, grace: float) -> None:
    """Stop each process and its whole group: SIGTERM, up to `grace` seconds for every member to go, SIGKILL.

    The SIGTERM goes to the leader while it lives: it is the one with a stop signal to honour, and it stops
    its own children in order (the qcluster's sentinel and workers die at once on a SIGTERM of their own,
    SIG_DFL, and the qcluster then waited for its SIGKILL). Members a leader leaves behind (it died, or
    returned before them) get the SIGTERM themselves. Linux gives a reaped leader's pid to no new process
    while a member of its group lives, so each signal reaches the group's own members, or (empty) nobody.
    """
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    orphans_told = set()
    while time.monotonic() < deadline:
        running = [process for process in processes if process.poll() is None]
        left = [process for process in processes if process not in running and group_alive(process.pid)]
        if not running and not left:
            break
        for process in left:
            if process.pid not in orphans_told:
                orphans_told.add(process.pid)
                signal_group(process.pid, signal.SIGTERM)
        time.sleep(0.1)
    for process in processes:
        signal_group(process.pid, signal.SIGKILL)
    for process in processes:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # uninterruptible sleep (a hung disk): nothing more to do here
            pass
