#!/usr/bin/env python3
"""CloudPivot host agent: the one program that runs executions, on the `local` cloud's host and in task VMs.

Like slurmd for a node: it asks the server for assignments (protocol v2, docs/runner.md), and for
each one forks a tiny supervisor (a copy of this process, no exec) that forks and execs the program
and writes its exit status to disk. The agent tails the output files and reports every attempt's
events and log bytes in batched requests. Standard library only, single-threaded (so fork is safe),
Python 3.8+, Linux. In a task VM it runs the one attempt its credential names (docs/runner.md).
"""

from __future__ import annotations

import base64
import collections
import fcntl
import json
import os
import random
import select
import shutil
import signal
import sys
import time

try:  # run as a script or from the zipapp (its sibling modules beside it), or imported as a package module
    import cloudpivot_boot as boot
    import cloudpivot_common as common
    from cloudpivot_agent_log import log, rotate_at
    from cloudpivot_outputs import outputs_event
    from cloudpivot_supervisor import crash_point, lock_held, read_json, supervise, write_json_if_room
    from cloudpivot_sync import VERSION, Connection, Failed, Refused
except ImportError:  # pragma: no cover - import path of the tests
    from runner_api.agent import cloudpivot_boot as boot
    from runner_api.agent import cloudpivot_common as common
    from runner_api.agent.cloudpivot_agent_log import log, rotate_at
    from runner_api.agent.cloudpivot_outputs import outputs_event
    from runner_api.agent.cloudpivot_supervisor import crash_point, lock_held, read_json, supervise, write_json_if_room
    from runner_api.agent.cloudpivot_sync import VERSION, Connection, Failed, Refused

EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_REFUSED, EXIT_LOCKED = 0, 1, 2, 3, 75
BATCH_SECONDS = 0.1  # at most one report per this long: news that comes meanwhile goes in one request
# A program's start is reported this long after the fork, so that a short program's start and exit go
# in one request at once, not its start at once and its exit one batch interval later.
START_HOLD_SECONDS = 0.03
# Output files are looked at this often while programs run (100 attempts: ~1 % of a core), and after each report.
TICK_SECONDS = 0.05
LONG_POLL_SECONDS = 20.0
HTTP_TIMEOUT, BACKOFF_START, BACKOFF_MAX = 10.0, 0.5, 10.0
LOG_CHUNK = 256 * 1024  # per stream per request
BATCH_BYTES = 4 * 1024 * 1024  # log bytes per request, all attempts together
RESULT_MAX = 64 * 1024
MAX_ATTEMPTS_PER_BATCH = 500  # the server takes up to 1000
# Longer than any answer can be under way (a long-poll and its timeouts), so a stale one cannot start it again.
REMEMBER_REMOVED_SECONDS = 300.0
STREAMS = ("stdout", "stderr")
END_EVENTS = ("exited", "lost")


# --------------------------------------------------------------------------- one attempt, as the agent sees it


class Attempt:
    """An attempt directory: the claim, the program's files, and the durable outbox of its events."""

    def __init__(self, agent: "Agent", directory: str):
        self.agent = agent
        self.dir = directory
        self.name = os.path.basename(directory)
        self.assignment = read_json(self.path("assignment.json")) or {}
        self.outbox = read_json(self.path("events.json")) or {"next_seq": 1, "keys": [], "pending": []}
        self.unsaved = False  # the outbox changed in memory but the disk had no room for it yet
        self.acked = {stream: None for stream in STREAMS}  # the server's log offsets, once it said them
        self.state = "new"  # new → running → ended
        self.supervisor = None  # pid while the supervisor is this agent's own child
        self.program = read_json(self.path("program.json"))
        self.stop_signals = []
        self.stop_deadline = None
        self.closed = False
        self.gone = False
        self.grace = float(self.assignment.get("stop_grace_seconds") or common.DEFAULT_GRACE)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    # ---- the outbox
    def add_event(self, key: str, kind: str, data: dict) -> None:
        """Once per key, on disk before it can be sent; seqs are per attempt, from 1."""
        box = self.outbox
        if key in box["keys"]:
            return
        seq = box["next_seq"]
        box["pending"].append({"seq": seq, "type": kind, "time": common.utc_stamp(), "data": data})
        box["keys"].append(key)
        box["next_seq"] = seq + 1
        self.save_outbox()
        self.agent.mark_dirty()

    def save_outbox(self) -> None:
        try:
            saved = write_json_if_room(self.path("events.json"), self.outbox)
        except FileNotFoundError:  # the server's cleanup removed a closed attempt's directory
            self.gone = True
            return
        if not saved and not self.unsaved:  # a full disk: kept (and sent) from memory, saved on a later tick
            log("%s: no room to save the outbox; kept in memory until there is" % self.name)
        self.unsaved = not saved

    def acknowledge(self, answer: dict, offsets: bool = True) -> None:
        acked = int(answer.get("acked_seq") or 0)
        pending = [event for event in self.outbox["pending"] if event["seq"] > acked]
        if len(pending) != len(self.outbox["pending"]):
            self.outbox["pending"] = pending
            self.save_outbox()
        given = answer.get("log_offsets") or {}
        for stream in STREAMS:
            if isinstance(given.get(stream), int) and (offsets or self.acked[stream] is None):
                self.acked[stream] = given[stream]
        if answer.get("stop_requested"):
            self.request_stop()
        if answer.get("closed"):
            self.closed = True
            self.request_stop()

    # ---- the program
    def start(self) -> None:
        """Fork the supervisor; it answers on a pipe once program.json is written (about a millisecond)."""
        assignment = self.assignment
        if assignment.get("stop_requested"):
            self.add_event("end", "exited", {"exit_code": None, "signal": None, "reason": "stopped before start"})
            self.state = "ended"
            return
        workdir = assignment.get("workdir") or self.path("work")
        if not assignment.get("workdir"):
            os.makedirs(workdir, mode=0o700, exist_ok=True)
        env = common.base_environment()
        env.update({str(k): str(v) for k, v in (assignment.get("env") or {}).items() if v is not None})
        env.update(
            {
                "CLOUDPIVOT_TASK_ID": str(assignment.get("task_id") or ""),
                "CLOUDPIVOT_ATTEMPT": self.name,
                "CLOUDPIVOT_RESULT_FILE": self.path("result.json"),
            }
        )
        spec = {
            "argv": assignment.get("argv"),
            "env": env,
            "workdir": workdir,
            "secret_files": assignment.get("secret_files") or [],
            "secret_error": str(assignment.get("secret_error") or ""),
            "outputs": assignment.get("outputs"),  # declared outputs: the supervisor collects them at the end
            "network": assignment.get("network"),  # "none": the program gets a network namespace of its own
            "stage_in": assignment.get("stage_in"),  # `object` data: fetched before the program starts
        }
        lock = os.open(self.path("supervisor.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)  # from here on, "the program may have started"
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            supervise(self.dir, spec, (lock, ready_w))
        os.close(lock)
        os.close(ready_w)
        select.select([ready_r], [], [], 10.0)
        os.close(ready_r)
        crash_point("agent.launched")  # the next agent finds the supervisor lock held: re-attach, no second start
        self.supervisor = pid
        self.agent.children[pid] = self
        self.state = "running"
        self.program = read_json(self.path("program.json"))
        self.agent.hold_until = time.monotonic() + START_HOLD_SECONDS
        self.add_event("started", "started", common.started_data((self.program or {}).get("pid", pid), VERSION))

    def reattach(self) -> None:
        """After an agent restart: follow a live supervisor, report an ended program, never start twice."""
        if os.path.exists(self.path("done")):
            self.state = "done"
        elif not os.path.exists(self.path("supervisor.lock")):
            self.start()  # the agent died before the fork: nothing ran, so starting now is the first start
        elif lock_held(self.path("supervisor.lock")):
            self.state = "running"
            self.add_event("started", "started", common.started_data((self.program or {}).get("pid"), VERSION))
            log("re-attached to %s (program pid %s)" % (self.name, (self.program or {}).get("pid")))
        else:
            self.ended()

    def program_alive(self) -> bool:
        info = self.program or {}
        if not info.get("pid") or info.get("boot_id") != common.read_boot_id():
            return False
        fields = common.read_proc_stat(int(info["pid"]))
        return bool(fields) and fields[0] != "Z" and int(fields[19]) == info.get("start_time")

    def signal_program(self, number: int) -> None:
        self.stop_signals.append(common.signal_name(number))
        if self.program_alive():
            try:
                os.killpg(int(self.program["pid"]), number)
            except (ProcessLookupError, PermissionError):
                pass

    def request_stop(self) -> None:
        if self.state == "running" and self.stop_deadline is None:
            log("stopping %s: SIGTERM to its process group" % self.name)
            self.signal_program(signal.SIGTERM)
            self.stop_deadline = time.monotonic() + self.grace

    def tick(self, now: float) -> None:
        if self.unsaved:
            self.save_outbox()
        if self.state != "running":
            return
        if self.stop_deadline is not None and now >= self.stop_deadline and "SIGKILL" not in self.stop_signals:
            self.signal_program(signal.SIGKILL)
        if self.supervisor is None and not lock_held(self.path("supervisor.lock")):
            self.ended()  # a re-attached supervisor (not our child) finished or died

    def ended(self) -> None:
        """The supervisor is gone: the result, then how the program ended (or that it was lost)."""
        self.state = "ended"
        self.agent.hold_until = 0.0  # its end goes now, with its start if that was still held
        self.program = read_json(self.path("program.json")) or self.program
        status = read_json(self.path("exit.json"))
        if status is None:
            if self.program_alive():  # a supervisor killed behind our back: nobody can wait for this program
                os.killpg(int(self.program["pid"]), signal.SIGKILL)
            rebooted = (self.program or {}).get("boot_id") not in (None, common.read_boot_id())
            why = (
                "the host rebooted while the program ran" if rebooted else "the program vanished without an exit status"
            )
            # a reboot is the infrastructure's doing: the task's on_interrupt decides, not its retries
            self.add_event("end", "lost", {"reason": why, "interrupted": True} if rebooted else {"reason": why})
            return
        self.add_result()
        if (outputs := outputs_event(self.dir, self.assignment)) is not None:  # the manifest, then the exit
            self.add_event("outputs", "outputs", outputs)
        self.add_event("end", "exited", common.exit_data(status, self.stop_signals, self.grace))

    def add_result(self) -> None:
        try:
            with open(self.path("result.json"), "rb") as handle:
                raw = handle.read(RESULT_MAX + 1)
        except OSError:
            return
        why = "it is larger than 64 KiB" if len(raw) > RESULT_MAX else ""
        try:
            value = None if why else json.loads(raw.decode("utf-8"), parse_constant=common.reject_constant)
        except ValueError as exc:
            why = "it is not valid JSON (%s)" % exc
        if why:
            self.add_event("result", "progress", {"message": "the result file was ignored: " + why})
        else:
            self.add_event("result", "result", common.result_data(value))

    # ---- reports
    def report(self, budget: int):
        """This attempt's part of the next request (None if nothing to say), and the log bytes it uses."""
        logs, complete, used = [], True, 0
        for stream in STREAMS:
            acked = self.acked[stream]
            if acked is None:
                complete = False
                continue
            size = common.file_size(self.path(stream))
            count = max(0, min(size - acked, LOG_CHUNK, budget - used))
            if count:
                try:
                    with open(self.path(stream), "rb") as handle:
                        handle.seek(acked)
                        data = handle.read(count)
                except FileNotFoundError:
                    self.gone = True
                    return None, 0
                logs.append({"stream": stream, "offset": acked, "data": base64.b64encode(data).decode()})
                used += len(data)
            if acked + count < size:
                complete = False
        events = self.outbox["pending"][:100]
        if not (complete and self.state == "ended"):
            events = [event for event in events if event["type"] not in END_EVENTS]  # the end goes after every byte
        if not logs and not events:
            return None, 0
        return {"attempt": self.name, "events": events, "logs": logs}, used

    def has_news(self) -> bool:
        if any(event["type"] not in END_EVENTS or self.state == "ended" for event in self.outbox["pending"]):
            return True
        return any(a is not None and common.file_size(self.path(s)) > a for s, a in self.acked.items())

    def finished(self) -> bool:
        return self.gone or self.state == "ended" and (self.closed or not self.outbox["pending"])

    def remove(self) -> bool:
        """The server closed the attempt and its program is gone: remove the run directory (the cleanup)."""
        if not (self.closed and self.state == "ended"):
            return False
        shutil.rmtree(self.dir, ignore_errors=True)
        return not os.path.exists(self.dir)


# --------------------------------------------------------------------------- the agent


class Agent:
    def __init__(self, args, credential: str, ssl_context, lock_inode: int):
        self.runs_dir = args.state_dir
        self.lock_inode = lock_inode
        self.name = args.name
        self.boot_id = common.read_boot_id()
        self.attempts = {}
        self.children = {}
        self.reports = Connection(args.server_url, credential, ssl_context)
        self.poll = Connection(args.server_url, credential, ssl_context)
        self.dirty_since, self.last_report, self.hold_until = None, 0.0, 0.0
        self.look_now = False  # look at the output files without waiting for the tick (a report just went)
        self.cleaned = set()  # closed attempts whose directory was removed, until the server acknowledged it
        # Removed directories can no longer refuse a second claim (the rename), so this life of the agent
        # remembers them: an answer computed before an attempt closed may arrive after it was removed.
        self.removed = set()
        self.removals = collections.deque()  # (time.monotonic(), name), oldest first
        self.poked = True  # sync at once on start
        self.one_attempt = credential.startswith("cpr_")  # a task VM's: it ends once its attempt is over and told
        self.stopping = False
        self.retry_at, self.delay = 0.0, BACKOFF_START
        self.wake_r, wake_w = os.pipe()
        for fd in (self.wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        for number in (signal.SIGCHLD, signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, self.on_signal)

    def still_mine(self) -> bool:
        """False once the runs directory was removed or replaced: this agent then serves nothing and ends."""
        try:
            return os.stat(os.path.join(self.runs_dir, "agent.lock")).st_ino == self.lock_inode
        except OSError:
            return False

    def on_signal(self, number, frame) -> None:
        if number == signal.SIGUSR1:
            self.poked = True  # the local backend: "an assignment is waiting"
        elif number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self.stopping = True

    def mark_dirty(self) -> None:
        if self.dirty_since is None:
            self.dirty_since = time.monotonic()

    # ---- the loop
    def run(self) -> int:
        self.scan()
        log("agent %s serving %s (pid %d)" % (self.name, self.runs_dir, os.getpid()))
        while not self.stopping and self.still_mine() and not self.all_done():
            readable = self.wait()
            self.reap()
            if self.poll.sent_at is not None and self.poll.answered(readable):
                self.exchange(self.poll, None, offsets=False)
            elif self.poll.sent_at is not None and time.monotonic() - self.poll.sent_at > LONG_POLL_SECONDS + 20:
                self.poll.close()  # an answer that never came: ask again
            now = time.monotonic()
            for attempt in list(self.attempts.values()):
                attempt.tick(now)
            self.forget_finished()
            self.look_now = False
            if now >= self.retry_at and (self.poked or self.news_due(now)):
                self.poked = False
                self.exchange(self.reports, self.batch(wait=0))
                self.look_now = True
            if self.poll.sent_at is None and time.monotonic() >= self.retry_at:
                self.send(self.poll, self.batch(wait=LONG_POLL_SECONDS, with_reports=False), LONG_POLL_SECONDS + 15)
        if self.all_done():
            log("the attempt is over and the server has everything; exiting")
        else:
            log("stopping; the programs keep running and a restarted agent re-attaches to them")
        return EXIT_OK

    def all_done(self) -> bool:
        return self.one_attempt and bool(self.removed) and not self.attempts and not self.cleaned

    def wait(self) -> list:
        now = time.monotonic()
        backing_off = now < self.retry_at  # news and pokes wait for the retry: no busy loop while the server is away
        timeouts = [self.retry_at - now] if backing_off else [5.0]
        if any(a.state == "running" for a in self.attempts.values()):
            timeouts.append(TICK_SECONDS)
        if self.dirty_since is not None and not backing_off:
            timeouts.append(max(0.0, self.report_due() - now))
        if (self.poked or self.look_now) and not backing_off:
            timeouts.append(0.0)
        fds = [self.wake_r] + ([self.poll.http.sock] if self.poll.sent_at is not None and self.poll.http else [])
        try:
            readable, _, _ = select.select(fds, [], [], min(timeouts))
        except InterruptedError:
            readable = []
        if self.wake_r in readable:
            try:
                while os.read(self.wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        return readable

    def reap(self) -> None:
        while self.children:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            attempt = self.children.pop(pid, None)
            if attempt is not None:
                attempt.supervisor = None
                attempt.ended()

    def news_due(self, now: float) -> bool:
        if self.dirty_since is None:
            if not any(a.has_news() for a in self.attempts.values()):
                return False
            self.mark_dirty()
        return now >= self.report_due()

    def report_due(self) -> float:
        """At once when idle, else one batch interval after the last report: latency when quiet, batches when busy."""
        return max(self.dirty_since, self.last_report + BATCH_SECONDS, self.hold_until)

    def forget_finished(self) -> None:
        """A closed attempt's directory is removed and the next sync says so; an unclosed one is marked done."""
        horizon = time.monotonic() - REMEMBER_REMOVED_SECONDS
        while self.removals and self.removals[0][0] < horizon:
            self.removed.discard(self.removals.popleft()[1])
        for name, attempt in list(self.attempts.items()):
            if attempt.finished():
                if attempt.remove():
                    self.cleaned.add(name)
                    self.removed.add(name)
                    self.removals.append((time.monotonic(), name))
                else:
                    try:
                        open(attempt.path("done"), "w").close()
                    except OSError:
                        pass  # the server's cleanup already removed the directory
                del self.attempts[name]

    # ---- requests
    def batch(self, wait: float, with_reports: bool = True) -> dict:
        entries, budget = [], BATCH_BYTES
        if with_reports:
            self.dirty_since, self.last_report = None, time.monotonic()
            for attempt in self.attempts.values():
                if len(entries) >= MAX_ATTEMPTS_PER_BATCH:
                    self.mark_dirty()  # the rest goes in the next request
                    break
                entry, used = attempt.report(budget)
                if entry is not None:
                    entries.append(entry)
                    budget -= used
        return {
            "protocol": 2,
            "agent": {"name": self.name, "boot_id": self.boot_id, "version": VERSION, "pid": os.getpid()},
            "known": sorted(self.attempts),
            "stopping": sorted(n for n, a in self.attempts.items() if a.stop_deadline is not None),
            "attempts": entries,
            "cleaned": sorted(self.cleaned),
            "wait": wait,
        }

    def send(self, connection: Connection, body: dict, timeout: float) -> bool:
        try:
            connection.send(body, timeout)
            connection.carried = body.get("cleaned") or []
            return True
        except Failed as exc:
            self.failed(exc)
            return False

    def exchange(self, connection: Connection, body, offsets: bool = True) -> None:
        """Send (unless already sent) and read one answer; apply it, or back off."""
        if body is not None and not self.send(connection, body, HTTP_TIMEOUT):
            return
        try:
            answer = connection.receive()
        except Failed as exc:
            self.failed(exc)
            return
        self.delay = BACKOFF_START
        self.cleaned.difference_update(connection.carried)
        self.apply(answer, offsets)

    def failed(self, exc: Exception) -> None:
        wait = self.delay * random.uniform(0.8, 1.0)
        log("sync failed (%s); retrying in %.1f s" % (exc, wait))
        self.retry_at = time.monotonic() + wait
        self.delay = min(self.delay * 2, BACKOFF_MAX)
        self.mark_dirty()

    def apply(self, answer: dict, offsets: bool) -> None:
        """A long-poll's log offsets may be older than a report answered meanwhile: taken only when unknown."""
        for name, part in (answer.get("attempts") or {}).items():
            attempt = self.attempts.get(name)
            if attempt is not None and isinstance(part, dict):
                attempt.acknowledge(part, offsets or None in attempt.acked.values())
        for assignment in answer.get("assignments") or []:
            self.claim(assignment)

    # ---- attempts
    def claim(self, assignment: dict) -> None:
        """The attempt directory, renamed into place with assignment.json inside, is the claim: at most one start."""
        name = str(assignment.get("attempt") or "")
        if not name or "/" in name or name.startswith(".") or name in self.attempts or name in self.removed:
            return
        final = os.path.join(self.runs_dir, name)
        tmp = os.path.join(self.runs_dir, ".claim-%s-%d" % (name, os.getpid()))
        os.makedirs(tmp, mode=0o700, exist_ok=True)
        if not write_json_if_room(os.path.join(tmp, "assignment.json"), assignment):
            shutil.rmtree(tmp, ignore_errors=True)  # no room: not claimed; the server hands it out again later
            return
        try:
            os.rename(tmp, final)
        except OSError:  # claimed before (by an earlier life of this agent): never a second start
            remove_claim(tmp)
            self.load(final)
            return
        attempt = Attempt(self, final)
        attempt.acknowledge(assignment)
        self.attempts[name] = attempt
        attempt.start()

    def load(self, directory: str) -> None:
        attempt = Attempt(self, directory)
        if not attempt.assignment or os.path.exists(attempt.path("done")):
            return
        self.attempts[attempt.name] = attempt
        attempt.reattach()

    def scan(self) -> None:
        for name in sorted(os.listdir(self.runs_dir)):
            if name.startswith(".claim-"):
                remove_claim(os.path.join(self.runs_dir, name))
            elif not name.startswith(".") and os.path.isdir(os.path.join(self.runs_dir, name)):
                self.load(os.path.join(self.runs_dir, name))


def remove_claim(path: str) -> None:
    """A claim directory never renamed into place: its agent died between the two steps."""
    for leftover in os.listdir(path):
        os.unlink(os.path.join(path, leftover))
    os.rmdir(path)


# --------------------------------------------------------------------------- entry point


def detach():
    """Fork; the parent exits once the agent holds its lock (or could not take it), the child goes on alone."""
    ready_r, ready_w = os.pipe()
    if os.fork() > 0:
        os.close(ready_w)
        answer = os.read(ready_r, 16)
        os._exit(EXIT_OK if answer == b"ok" else EXIT_LOCKED)
    os.close(ready_r)
    os.setsid()
    return ready_w


def main(argv=None) -> int:
    args = boot.build_parser().parse_args(argv)
    try:
        boot.settle(args)
        ssl_context = common.make_ssl_context(args.ca_file) if args.server_url.startswith("https:") else None
        os.makedirs(args.state_dir, mode=0o700, exist_ok=True)
        credential = boot.credential(args, ssl_context)
    except (common.ConfigError, OSError) as exc:
        log("configuration error: %s" % exc)
        return EXIT_CONFIG
    except Refused as exc:
        log(str(exc))
        return EXIT_REFUSED
    ready = detach() if args.detach else None
    lock = os.open(os.path.join(args.state_dir, "agent.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log("another agent holds %s; exiting" % os.path.join(args.state_dir, "agent.lock"))
        return EXIT_LOCKED
    rotate_at(os.path.join(args.state_dir, "agent.log"), args.log_max_bytes, args.log_keep)
    os.ftruncate(lock, 0)
    os.write(lock, b"%d\n" % os.getpid())
    if ready is not None:
        os.write(ready, b"ok")
        os.close(ready)
    try:
        return Agent(args, credential, ssl_context, os.fstat(lock).st_ino).run()
    except Refused as exc:
        log(str(exc))
        return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main())
