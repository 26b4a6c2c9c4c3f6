"""`cloudpivot token list|create|revoke`: your own API tokens."""

from __future__ import annotations

import sys

from cloudpivot_cli import exitcodes, output
from cloudpivot_cli.output import age, field
from cloudpivot_cli.parsing import add_command, add_output, connect

EXAMPLES = """\
  cloudpivot token create ci --expires-in-days 90
  cloudpivot token list
  cloudpivot token revoke 12
"""

COLUMNS = [
    ("ID", field("id")),
    ("NAME", field("name")),
    ("HINT", field("hint")),
    ("ACTIVE", field("is_active")),
    ("AGE", age("created_at")),
    ("EXPIRES", field("expires_at")),
    ("LAST USED", field("last_used_at")),
]


def list_tokens(args) -> int:
    output.show(connect(args).get("/api/v1/tokens"), args.output, COLUMNS)
    return exitcodes.OK


def create(args) -> int:
    token = connect(args).post("/api/v1/tokens", {"name": args.name, "expires_in_days": args.expires_in_days})
    if args.output in ("json", "yaml"):
        output.document(token, args.output)
    else:
        print(token["token"])
        print(f"token {token['id']} ({token['name']}): shown once, keep it now", file=sys.stderr)
    return exitcodes.OK


def revoke(args) -> int:
    connect(args).delete(f"/api/v1/tokens/{args.id}")
    print(f"token {args.id} revoked")
    return exitcodes.OK


def register(commands) -> None:
    p = add_command(commands, "list", "your tokens (never their secret)", list_tokens, "  cloudpivot token list\n")
    add_output(p)
    p = add_command(
        commands,
        "create",
        "make a token; prints it once on stdout",
        create,
        "  cloudpivot token create ci-nightly --expires-in-days 90\n",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--expires-in-days", type=int, metavar="DAYS", help="1–3650 (default: never expires)")
    add_output(p, choices=("table", "json", "yaml"))
    p = add_command(commands, "revoke", "revoke a token (the record stays)", revoke, "  cloudpivot token revoke 12\n")
    p.add_argument("id", metavar="ID")
