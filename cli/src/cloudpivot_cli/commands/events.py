"""`cloudpivot events [-f]`: the event feed of your projects (GET /api/v1/events), resumable by cursor."""

from __future__ import annotations

import json
import sys

from cloudpivot_cli import exitcodes
from cloudpivot_cli.parsing import add_command, connect

EXAMPLES = """\
  cloudpivot events                                  # everything the feed keeps, oldest first
  cloudpivot events -f --after 1412 --type task.state   # follow from a cursor you kept
  cloudpivot events -f -o json | my-consumer         # one JSON object per line (its "id" is the cursor)
"""
# Each long poll holds the request this long when nothing is new (the server allows at most 30).
WAIT_SECONDS = 25


def line(entry: dict) -> str:
    subject = entry.get("task") or entry.get("operation") or ""
    head = f"{entry['id']:>8}  {entry['time']}  {entry['type']:<20} {entry['project']:<12}"
    return f"{head} {subject}  {entry['message']}"


def show(args) -> int:
    client = connect(args)
    after = args.after
    params = {"type": args.type or None, "project": args.project or None, "task": args.task, "limit": 500}
    while True:
        page = client.get("/api/v1/events", after=after, wait=WAIT_SECONDS if args.follow else None, **params)
        for entry in page["events"]:
            print(json.dumps(entry) if args.output == "json" else line(entry), flush=True)
        after = page["next_after"]
        if not args.follow and not page["has_more"]:
            print(f"cursor {after}: pass --after {after} to continue from here", file=sys.stderr)
            return exitcodes.OK


def register(commands) -> None:
    p = add_command(
        commands, "events", "task events and operation states of your projects, in one order", show, EXAMPLES
    )
    p.add_argument("-f", "--follow", action="store_true", help="keep waiting for new entries (long poll)")
    p.add_argument("--after", type=int, default=0, metavar="CURSOR", help="only entries after this id (default 0)")
    p.add_argument("--type", action="append", metavar="TYPE", help="task.state, operation.state, task.* (repeatable)")
    p.add_argument("--project", action="append", metavar="SLUG", help="one project (repeatable)")
    p.add_argument("--task", metavar="ID", help="one task's entries")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table, or JSON lines")
