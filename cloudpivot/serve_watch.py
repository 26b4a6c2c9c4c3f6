"""What `manage.py serve` becomes once its children are up: a process of the standard library alone.

serve needs Django to migrate, start the children and print how to log in; after that it only waits, and a
Django process waiting costs about 115 MB of memory for nothing. So serve execs this module in its own
process (same pid: the children stay its children) and it does the waiting: Ctrl-C or SIGTERM, or the exit of
any child, stops the host agents (their programs run on) and every child's whole process group
(process_groups.stop_groups), and a child that died is said on stderr with exit code 1, as serve said it.

    python -m cloudpivot.serve_watch --grace 10 [--agent-lock RUNS_DIR/agent.lock …] NAME=PID …
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import sys
import time

from cloudpivot.process_groups import stop_groups

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Child:
    """A child by its pid, with the part of subprocess.Popen that stop_groups uses (it was started before the exec)."""

    def __init__(self, name: str, pid: int) -> None:
        self.name, self.pid, self.returncode = name, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.returncode


def stop_agent(lock_path: str) -> None:
    """SIGTERM the host agent holding this lock (its pid is in the file); its programs run on."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return  # nobody holds it: no agent runs
    except BlockingIOError:
        text = os.read(fd, 32).decode(errors="replace").strip()
    finally:
        os.close(fd)
    if text.isdigit():
        try:
            os.kill(int(text), signal.SIGTERM)
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cloudpivot.serve_watch")
    parser.add_argument("--grace", type=float, required=True)
    parser.add_argument("--agent-lock", action="append", default=[])
    parser.add_argument("children", nargs="+", metavar="NAME=PID")
    args = parser.parse_args(argv)
    children = [Child(name, int(pid)) for name, _, pid in (item.rpartition("=") for item in args.children)]
    stop = {"now": False}

    def request_stop(signum, frame) -> None:
        stop["now"] = True

    for number in STOP_SIGNALS:
        signal.signal(number, request_stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # serve blocked them across the exec: none is lost
    while not stop["now"] and all(child.poll() is None for child in children):
        time.sleep(0.5)
    for lock in args.agent_lock:
        stop_agent(lock)
    stop_groups(children, grace=args.grace)  # type: ignore[arg-type] - Child is Popen enough for it
    failed = [child.name for child in children if child.returncode not in (0, -15)]
    if failed and not stop["now"]:
        sys.stderr.write(f"CommandError: stopped because {', '.join(failed)} exited\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
