"""`cloudpivot login` and `cloudpivot context list|use|delete`: which server and token the commands use."""

from __future__ import annotations

import getpass
import os
import sys

from cloudpivot_cli import config, exitcodes, output
from cloudpivot_cli.client import Client
from cloudpivot_cli.parsing import UsageError, add_command, add_group


def login(args) -> int:
    name = getattr(args, "context", None) or "default"
    known = config.load()["contexts"].get(name, {})
    url = args.url or os.environ.get("CLOUDPIVOT_URL") or known.get("url")
    if not url:
        raise UsageError("give the server with --url URL (e.g. http://127.0.0.1:8000)")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url must start with http:// or https:// (got {url!r})")
    token = args.token or read_token()
    projects = Client(url, token, retry_seconds=5).get(
        "/api/v1/projects"
    )  # proves the URL and the token before saving them
    path = config.set_context(name, url=url, token=token)
    roles = ", ".join(f"{p['slug']} ({p.get('role')})" for p in projects) or "no projects yet"
    print(f"logged in to {url.rstrip('/')} as context {name!r}; projects: {roles}")
    print(f"saved in {path}", file=sys.stderr)
    return exitcodes.OK


def read_token() -> str:
    """From the prompt on a terminal, else the first line of stdin (so `… | cloudpivot login` works)."""
    if os.environ.get("CLOUDPIVOT_TOKEN"):
        return os.environ["CLOUDPIVOT_TOKEN"]
    token = getpass.getpass("API token: ") if sys.stdin.isatty() else sys.stdin.readline()
    token = token.strip()
    if not token:
        raise UsageError("no token given (--token, the prompt, or stdin)")
    return token


def list_contexts(args) -> int:
    data = config.load()
    rows = [
        {"current": "*" if name == data["current-context"] else "", "name": name, "url": entry.get("url")}
        for name, entry in data["contexts"].items()
    ]
    output.table(
        rows, [("CURRENT", output.field("current")), ("NAME", output.field("name")), ("URL", output.field("url"))]
    )
    return exitcodes.OK


def use_context(args) -> int:
    config.use_context(args.name)
    print(f"now using context {args.name!r}")
    return exitcodes.OK


def delete_context(args) -> int:
    config.delete_context(args.name)
    print(f"deleted context {args.name!r}")
    return exitcodes.OK


def register(commands) -> None:
    p = add_command(
        commands,
        "login",
        "check a server URL and API token and save them as a named context (the current one from now on)",
        login,
        "  cloudpivot login --url http://127.0.0.1:8000                  # asks for the token\n"
        '  echo "$TOKEN" | cloudpivot login --url https://cp.example.org --context prod\n'
        '  cloudpivot login --context prod --token "$NEW_TOKEN"            # a new token, same URL\n',
    )
    p.add_argument("--url", help="the server's base URL (CLOUDPIVOT_URL by default)")
    p.add_argument("--token", help="an API token (default: asked, or read from stdin)")

    group = add_group(
        commands,
        "context",
        "named server + token pairs, like kubectl's contexts",
        "  cloudpivot context list\n  cloudpivot context use prod\n",
    )
    add_command(group, "list", "list contexts; * marks the current one", list_contexts, "  cloudpivot context list\n")
    p = add_command(group, "use", "make a context the current one", use_context, "  cloudpivot context use prod\n")
    p.add_argument("name", metavar="NAME")
    p = add_command(
        group, "delete", "forget a context and its token", delete_context, "  cloudpivot context delete old\n"
    )
    p.add_argument("name", metavar="NAME")
