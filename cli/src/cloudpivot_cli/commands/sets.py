"""`cloudpivot set …`: submit a task set (a template and a count or a parameter file), list, get, watch, cancel,
retry (with changes), delete."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from cloudpivot_cli import exitcodes, output, specs
from cloudpivot_cli.client import body_of
from cloudpivot_cli.output import age, field
from cloudpivot_cli.parsing import UsageError, add_command, add_output, connect, new_key

EXAMPLES = """\
  cloudpivot set submit -f spec.yaml --count 100 --max-running 10 --wait
  cloudpivot set submit -f train.yaml --items params.jsonl
  cloudpivot set get ID
  cloudpivot set watch ID
  cloudpivot set retry-failed ID --set resources.memory_mb=4096
  cloudpivot set delete ID
"""
ENDED = ("FINISHED", "CANCELLED")
POLL_SECONDS = float(os.environ.get("CLOUDPIVOT_POLL_SECONDS", "1.0"))
PROGRESS = ("waiting", "pending", "running", "succeeded", "failed")


def counts_words(counts: dict) -> str:
    """`120 waiting, 10 running, 70 succeeded`: the counts that are not 0, the usual ones first."""
    names = [*PROGRESS, *sorted(set(counts) - set(PROGRESS))]
    return ", ".join(f"{counts[name]} {name}" for name in names if counts.get(name)) or "no elements"


COLUMNS = [
    ("ID", field("id")),
    ("NAME", field("name")),
    ("STATE", field("state")),
    ("TOTAL", field("total")),
    ("PROGRESS", lambda row: counts_words(row.get("counts") or {})),
    ("AGE", age("created_at")),
]
WIDE = [("OWNER", field("owner")), ("PROJECT", field("project")), ("MAX RUNNING", field("max_running"))]


def read_items(name: str) -> list:
    """Parameter objects from a JSONL file (one object per line; blank lines skipped) or a JSON list."""
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {name}: {exc}") from None
    if name.endswith(".json"):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{name} is not valid JSON: {exc}") from None
        if not isinstance(items, list):
            raise UsageError(f"{name} must hold a JSON list of parameter objects")
        return items
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except ValueError as exc:
                raise UsageError(f"{name} line {number} is not a JSON object: {exc}") from None
    if not items:
        raise UsageError(f"{name} holds no parameter objects (one JSON object per line)")
    return items


def submit(args) -> int:
    template = specs.read(args.file)
    if args.project:
        template["project"] = args.project
    body: dict = {"template": template, "max_running": args.max_running}
    if args.name:
        body["name"] = args.name
    if args.items:
        body["items"] = read_items(args.items)
    else:
        body["count"] = args.count
    client = connect(args)
    key = args.idempotency_key or new_key()
    response = client.request("POST", "/api/v1/task-sets", json=body, headers={"Idempotency-Key": key})
    task_set = body_of(response)
    replayed = response.headers.get("Idempotent-Replayed") == "true"
    out = sys.stderr if args.wait else sys.stdout
    if args.output in ("json", "yaml"):
        output.document(task_set, args.output, out=out)
    else:
        note = " (already submitted with this Idempotency-Key)" if replayed else ""
        print(
            f"task set {task_set['id']} {task_set['state']}: {task_set['total']} elements{note}", file=out, flush=True
        )
    return wait(client, task_set["id"]) if args.wait else exitcodes.OK


def wait(client, set_id: str) -> int:
    """Print the progress as it changes until the set ends; 0 when every element succeeded."""
    last = ""
    while True:
        task_set = client.get(f"/api/v1/task-sets/{set_id}")
        words = counts_words(task_set["counts"])
        if words != last:
            print(f"task set {set_id}: {words}", file=sys.stderr, flush=True)
            last = words
        if task_set["state"] in ENDED:
            break
        time.sleep(POLL_SECONDS)
    status = set_exit_status(task_set)
    print(f"task set {set_id} {task_set['state']} (exit status {status})", file=sys.stderr, flush=True)
    return status


# The element states that are ends (a task's TERMINAL states, as the counts name them).
DONE = ("succeeded", "failed", "timed_out", "cancelled")
BAR_WIDTH = 30


def progress_line(task_set: dict, width: int = BAR_WIDTH) -> str:
    """`[#########.....................]  31% 310/1000 · 10 running, 680 waiting, 300 succeeded, 10 failed`: how many
    elements ended, as a bar and a share of the total, then the counts that are not 0 (the last state for an
    ended set)."""
    counts, total = task_set.get("counts") or {}, task_set.get("total") or 0
    done = sum(counts.get(name, 0) for name in DONE)
    filled = min(width, done * width // total) if total else width
    percent = min(100, done * 100 // total) if total else 100
    line = f"[{'#' * filled}{'.' * (width - filled)}] {percent:3d}% {done}/{total} · {counts_words(counts)}"
    return f"{line} · {task_set['state']}" if task_set.get("state") in ENDED else line


def watch(args) -> int:
    """Show the set's progress until it ends (at once for an ended set); the exit status of `submit --wait`.

    On a terminal one line is redrawn in place; otherwise (a pipe, a log) a line is printed each time it changes.
    """
    client = connect(args)
    tty = sys.stdout.isatty()
    last = ""
    try:
        while True:
            task_set = client.get(f"/api/v1/task-sets/{args.id}")
            line = progress_line(task_set)
            if line != last:
                print(f"\r\033[K{line}" if tty else line, end="" if tty else "\n", flush=True)
                last = line
            if task_set["state"] in ENDED:
                break
            time.sleep(args.interval if args.interval is not None else POLL_SECONDS)
    finally:
        if tty and last:
            print(flush=True)  # the redrawn line stays, the prompt comes below it (after ^C too)
    status = set_exit_status(task_set)
    print(f"task set {task_set['id']} {task_set['state']} (exit status {status})", file=sys.stderr, flush=True)
    return status


def set_exit_status(task_set: dict) -> int:
    if task_set["state"] == "CANCELLED":
        return exitcodes.CANCELLED
    if task_set["counts"].get("succeeded") == task_set["total"]:
        return exitcodes.OK
    return exitcodes.SET_INCOMPLETE


def list_sets(args) -> int:
    rows = list(connect(args).pages("/api/v1/task-sets", limit=args.limit))
    output.show(rows, args.output, COLUMNS, WIDE)
    return exitcodes.OK


def get(args) -> int:
    task_set = connect(args).get(f"/api/v1/task-sets/{args.id}")
    if args.output in ("json", "yaml"):
        output.document(task_set, args.output)
    else:
        output.show([task_set], args.output, COLUMNS, WIDE)
    return exitcodes.OK


def cancel(args) -> int:
    task_set = connect(args).post(f"/api/v1/task-sets/{args.id}/cancel")
    print(f"task set {task_set['id']} {task_set['state']}: {counts_words(task_set['counts'])}")
    return exitcodes.OK


def retry_failed(args) -> int:
    changes = retry_changes(args.changes, args.set or [])
    answer = connect(args).post(f"/api/v1/task-sets/{args.id}/retry-failed", {"changes": changes} if changes else None)
    how = " with changes" if changes else ""
    print(f"task set {answer['set']['id']}: {answer['retrying']} failed elements retried{how} as it has room")
    return exitcodes.OK


def retry_changes(name: str | None, pairs: list[str]) -> dict:
    """A partial task document from --changes FILE, then each --set path=value over it (a value is read as
    JSON when it is JSON: 4096, true, ["a", "b"]; otherwise as a string)."""
    changes = specs.read(name) if name else {}
    for pair in pairs:
        path, sep, text = pair.partition("=")
        if not sep or not path:
            raise UsageError(f"--set {pair}: give a field path and a value, e.g. --set resources.memory_mb=4096")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        changes[path] = value
    return changes


def delete(args) -> int:
    connect(args).delete(f"/api/v1/task-sets/{args.id}")
    print(f"task set {args.id} deleted; its elements stay as tasks")
    return exitcodes.OK


def register(commands) -> None:
    p = add_command(
        commands,
        "submit",
        "submit a task set: a task document as the template, and --count or --items",
        submit,
        "  cloudpivot set submit -f spec.yaml --count 100 --max-running 10\n"
        "  cloudpivot set submit -f train.yaml --items params.jsonl --wait   # exit 0: every element succeeded\n\n"
        "In the template, {{index}} is the element's index and {{name}} an item's parameter `name`;\n"
        "each element also gets CLOUDPIVOT_SET_INDEX and its parameters as environment variables.\n\n"
        + exitcodes.help_text(),
    )
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="the template: spec.yaml, spec.json, or -")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--count", type=int, metavar="N", help="N elements, {{index}} 0 … N-1")
    how.add_argument("--items", metavar="FILE", help="parameters: one JSON object per line (.jsonl) or a JSON list")
    p.add_argument("--max-running", type=int, metavar="N", help="at most N elements unfinished at once")
    p.add_argument("--name", help="the set's name (default: the template's)")
    p.add_argument("--project", metavar="P", help="the owning project (sets `project` in the template)")
    p.add_argument("--wait", action="store_true", help="print progress until the set ends; exit 0 if all succeeded")
    p.add_argument("--idempotency-key", metavar="KEY", help="send this key (default: a new one per command)")
    add_output(p, default="table", choices=("table", "json", "yaml"))

    p = add_command(commands, "list", "list task sets, newest first", list_sets, "  cloudpivot set list -o wide\n")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50; pages are followed)")
    add_output(p)

    p = add_command(commands, "get", "one task set with its progress", get, "  cloudpivot set get ID -o yaml\n")
    p.add_argument("id", metavar="ID")
    add_output(p)

    p = add_command(
        commands,
        "watch",
        "show a set's progress as a bar until it ends; exit as `set submit --wait` does",
        watch,
        "  cloudpivot set watch ID\n"
        "  cloudpivot set watch ID --interval 5 | tee progress.log   # a line each time it changes\n\n"
        + exitcodes.help_text(),
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("--interval", type=float, metavar="S", help="seconds between looks (default 1)")

    for verb, text, run in (
        ("cancel", "cancel a set: no further element starts, unfinished ones are cancelled", cancel),
        ("delete", "delete a finished or cancelled set; its elements stay as tasks", delete),
    ):
        p = add_command(commands, verb, text, run, f"  cloudpivot set {verb} ID\n")
        p.add_argument("id", metavar="ID")

    p = add_command(
        commands,
        "retry-failed",
        "run the set's FAILED and TIMED_OUT elements again as new attempts, optionally with changes",
        retry_failed,
        "  cloudpivot set retry-failed ID\n"
        "  cloudpivot set retry-failed ID --set resources.memory_mb=4096 --set timeout_seconds=600\n"
        "  cloudpivot set retry-failed ID --changes more-memory.yaml   # a partial task document\n",
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("--changes", metavar="FILE", help="a partial task document merged over the template (YAML/JSON)")
    p.add_argument(
        "--set", action="append", metavar="PATH=VALUE", help="change one field, e.g. resources.memory_mb=4096 (repeat)"
    )
