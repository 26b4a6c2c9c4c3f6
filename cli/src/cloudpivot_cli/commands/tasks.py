"""`cloudpivot task …`: submit, list, get, describe, logs, events, cancel, retry, outputs, provenance."""

from __future__ import annotations

import argparse
import json
import sys
import time

from cloudpivot_cli import exitcodes, follow, output, specs
from cloudpivot_cli.client import body_of
from cloudpivot_cli.commands import outputs as task_outputs
from cloudpivot_cli.commands import provenance as task_provenance
from cloudpivot_cli.output import age, field
from cloudpivot_cli.parsing import add_command, add_output, connect, new_key

STATES = (
    "PENDING",
    "SUBMITTING",
    "STARTING",
    "RUNNING",
    "RETRY_WAIT",
    "CANCELLING",
    "UNKNOWN",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "TIMED_OUT",
)
EXAMPLES = """\
  cloudpivot task submit -f spec.yaml --wait --follow
  cloudpivot task list --state RUNNING -o wide
  cloudpivot task logs -f ID
  cloudpivot task describe ID
  cloudpivot task outputs ID --download results/
  cloudpivot task provenance ID -o provenance.json --verify
"""

COLUMNS = [
    ("ID", field("id")),
    ("NAME", field("name")),
    ("STATE", field("state")),
    ("EXIT", field("exit_code")),
    ("CLOUD", field("cloud")),
    ("PROJECT", field("project")),
    ("AGE", age("created_at")),
]
WIDE = [
    ("OWNER", field("owner")),
    ("ATTEMPTS", field("attempts_count")),
    ("QUEUE", field("queue_position")),
    ("REASON", field("state_reason")),
]
PHASES = ["admitted_at", "cloud_created_at", "runner_contact_at", "program_started_at", "finished_at"]


def submit(args) -> int:
    document = specs.read(args.file)
    if args.project:
        document["project"] = args.project
    client = connect(args)
    key = args.idempotency_key or new_key()
    response = client.request("POST", "/api/v1/tasks", json=document, headers={"Idempotency-Key": key})
    task = body_of(response)
    replayed = response.headers.get("Idempotent-Replayed") == "true"
    waiting = args.wait or args.follow
    if args.output in ("json", "yaml"):
        output.document(task, args.output, out=sys.stderr if waiting else None)
    else:
        note = " (already submitted with this Idempotency-Key)" if replayed else ""
        print(f"task {task['id']} {task['state']}{note}", file=sys.stderr if waiting else sys.stdout, flush=True)
    if not waiting:
        return exitcodes.OK
    return finish(client, task["id"], follow_log=args.follow)


def finish(client, task_id: str, *, follow_log: bool) -> int:
    """Wait for the task (printing its log when asked) and end with its exit status."""
    if follow_log:
        task = follow.logs(client, task_id, follow=True)
    else:
        task = follow.wait(client, task_id)
    status = follow.exit_status(client, task)
    reason = f": {task['state_reason']}" if task.get("state_reason") else ""
    print(f"task {task['id']} {task['state']} (exit status {status}){reason}", file=sys.stderr, flush=True)
    return status


def list_tasks(args) -> int:
    client = connect(args)
    filters = {"state": args.state, "cloud": args.cloud, "project": args.project, "owner": args.owner, "q": args.search}
    rows = list(client.pages("/api/v1/tasks", limit=args.limit, **filters))
    if not args.watch:
        output.show(rows, args.output, COLUMNS, WIDE)
        return exitcodes.OK
    emit = watch_printer(args.output)
    emit(rows, first=True)
    seen = {row["id"]: (row["state"], row.get("exit_code")) for row in rows}
    while True:  # until Ctrl-C, as kubectl get --watch
        time.sleep(args.interval)
        changed = []
        for row in reversed(list(client.pages("/api/v1/tasks", limit=args.limit, **filters))):
            now = (row["state"], row.get("exit_code"))
            if seen.get(row["id"]) != now:
                seen[row["id"]] = now
                changed.append(row)
        if changed:
            emit(changed, first=False)


def watch_printer(fmt: str):
    """Tables print a header once and then a row per change; JSON one line per document; YAML `---` documents."""

    def emit(rows: list[dict], *, first: bool) -> None:
        if fmt in ("table", "wide"):
            output.table(rows, COLUMNS + WIDE if fmt == "wide" else COLUMNS, header=first)
            return
        for row in rows:
            if fmt == "json":
                print(json.dumps(row, ensure_ascii=False), flush=True)
            else:
                print("---")
                output.document(row, "yaml")

    return emit


def get(args) -> int:
    task = connect(args).get(follow.task_path(args.id))
    if args.output in ("json", "yaml"):
        output.document(task, args.output)
    else:
        output.show([task], args.output, COLUMNS, WIDE)
    return exitcodes.OK


def describe(args) -> int:
    client = connect(args)
    task = client.get(follow.task_path(args.id))
    attempts = client.get(f"{follow.task_path(args.id)}/attempts")["attempts"]
    last_seq = task.get("last_event_seq") or 0
    recent = client.get(
        f"{follow.task_path(args.id)}/events", after_seq=max(0, last_seq - args.events), limit=args.events
    )
    spec = task.get("spec") or {}
    output.details(
        [
            ("ID", task["id"]),
            ("Name", task.get("name")),
            ("State", task["state"] + (f" ({task['state_reason']})" if task.get("state_reason") else "")),
            ("Exit code", task.get("exit_code")),
            ("Cloud", task.get("cloud")),
            ("Project", task.get("project")),
            ("Owner", task.get("owner")),
            ("Command", spec.get("command")),
            ("Image", spec.get("image")),
            ("Retries", f"{task.get('failed_attempts', 0)} failed of {task.get('retry_limit', 0)} allowed"),
            ("Timeout", f"{task['timeout_seconds']} s" if task.get("timeout_seconds") else "none"),
            ("Queue position", task.get("queue_position")),
            ("Created", task.get("created_at")),
            ("Started", task.get("started_at")),
            ("Finished", task.get("finished_at")),
        ]
    )
    print("\nAttempts:")
    output.table(
        attempts,
        [
            ("#", field("number")),
            ("STATE", field("state")),
            ("EXIT", field("exit_code")),
            ("SIGNAL", field("exit_signal")),
            ("REASON", field("failure_reason")),
        ]
        + [(name.removesuffix("_at").upper(), field(name)) for name in PHASES],
    )
    for attempt in attempts:
        hold = attempt.get("debug_hold") or {}
        if hold.get("active"):
            how = hold.get("how_to_get_in") or {}
            print(f"\nDebug hold: attempt {attempt['number']} is kept until {hold['until']}; to get in:")
            print(f"  {how.get('command', '')}")
            print(f"  release it now: cloudpivot task release-hold {task['id']}")
    print("\nLast events:")
    for event in recent["events"]:
        print("  " + follow.event_line(event))
    return exitcodes.OK


def logs(args) -> int:
    client = connect(args)
    task = follow.logs(client, args.id, attempt=args.attempt, stream=args.stream, follow=args.follow)
    return exitcodes.OK if task is None or task["state"] != "UNKNOWN" else exitcodes.UNKNOWN


def events(args) -> int:
    follow.events(connect(args), args.id, after=args.after, follow=args.follow)
    return exitcodes.OK


def act(verb: str):
    def run(args) -> int:
        task = connect(args).post(f"{follow.task_path(args.id)}/{verb}")
        print(f"task {task['id']} {task['state']}")
        return exitcodes.OK

    return run


def release_hold(args) -> int:
    answer = connect(args).post(f"{follow.task_path(args.id)}/release-hold")
    print(answer["message"])
    return exitcodes.OK


def register(commands) -> None:
    p = add_command(
        commands,
        "submit",
        "submit a task document (YAML or JSON); prints the task id",
        submit,
        "  cloudpivot task submit -f spec.yaml\n"
        "  cloudpivot task submit -f spec.json --project alpha --wait     # exit status = the program's\n"
        "  cloudpivot task submit -f - --follow <<'EOF'\n"
        "  cloud: local\n  command: [python3, -c, \"print('hello')\"]\n  EOF\n\n" + exitcodes.help_text(),
    )
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="spec.yaml, spec.json, or - for stdin")
    p.add_argument("--project", metavar="P", help="the owning project (sets `project` in the document)")
    p.add_argument("--wait", action="store_true", help="wait for the task to end; exit with its exit status")
    p.add_argument("--follow", action="store_true", help="print the log as it comes while waiting (implies --wait)")
    p.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="send this key (default: a new one per command; the same key and document never make two tasks)",
    )
    add_output(p, default="table", choices=("table", "json", "yaml"))

    p = add_command(
        commands,
        "list",
        "list tasks, newest first",
        list_tasks,
        "  cloudpivot task list --state RUNNING --state PENDING --cloud local\n"
        "  cloudpivot task list -o json --limit 500 | jq '.[].id'\n"
        "  cloudpivot task list --project alpha --watch\n",
    )
    p.add_argument("--state", action="append", choices=STATES, help="only these states (repeatable)")
    p.add_argument("--cloud", help="only this cloud")
    p.add_argument("--project", help="only this project")
    p.add_argument("--owner", help="only this owner's (username)")
    p.add_argument("-q", "--search", metavar="TEXT", help="names containing TEXT")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50; pages are followed)")
    p.add_argument("-w", "--watch", action="store_true", help="keep printing tasks as they change (Ctrl-C ends)")
    p.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    add_output(p)

    for name, text, run in (
        ("get", "one task", get),
        ("describe", "a task with its attempts, phases and last events", describe),
    ):
        p = add_command(commands, name, text, run, f"  cloudpivot task {name} 3f2c9a60-…\n")
        p.add_argument("id", metavar="ID", help="the task's id")
        if name == "get":
            add_output(p, default="yaml")
        else:
            p.add_argument("--events", type=int, default=10, help="how many recent events (default 10)")

    p = add_command(
        commands,
        "logs",
        "print a task's log (latest attempt, both streams, in arrival order)",
        logs,
        "  cloudpivot task logs ID\n  cloudpivot task logs -f ID                    # until the task ends\n"
        "  cloudpivot task logs ID --attempt 1 --stream stderr\n",
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the task ends")
    p.add_argument(
        "--attempt", type=int, metavar="N", help="this attempt (default: the latest; -f moves on to retries)"
    )
    p.add_argument("--stream", choices=("stdout", "stderr"), help="one stream only")

    p = add_command(
        commands,
        "events",
        "a task's history in order",
        events,
        "  cloudpivot task events ID\n  cloudpivot task events -f ID --after 12\n",
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new events until the task ends")
    p.add_argument("--after", type=int, default=0, metavar="SEQ", help="only events after this seq")

    for verb, text in (
        ("cancel", "cancel a task (a running one goes CANCELLING first)"),
        ("retry", "run a finished (or UNKNOWN) task again as a new attempt"),
    ):
        p = add_command(commands, verb, text, act(verb), f"  cloudpivot task {verb} ID\n")
        p.add_argument("id", metavar="ID")
    p = add_command(
        commands,
        "release-hold",
        "end a failed attempt's debug hold now: its pod or VM is cleaned up",
        release_hold,
        "  cloudpivot task release-hold ID\n",
    )
    p.add_argument("id", metavar="ID")
    task_outputs.register(commands)
    task_provenance.register_task(commands)
