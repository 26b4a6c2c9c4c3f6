"""Small pieces shared by the command modules: sub-command groups with help and examples, output flags."""

from __future__ import annotations

import argparse
import uuid

from cloudpivot_cli import output
from cloudpivot_cli.client import Client
from cloudpivot_cli.config import resolve


class UsageError(Exception):
    """The command line or an input file is wrong: exit status 2."""


def documented(commands, name: str, help_text: str, examples: str):
    """A sub-command parser whose --help ends with examples, printed as written."""
    return commands.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=("examples:\n" + examples) if examples else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_group(commands, name: str, help_text: str, examples: str = ""):
    """A command such as `task` whose own sub-commands come next; alone it prints its help."""
    group = documented(commands, name, help_text, examples)
    group.set_defaults(group_parser=group)
    return group.add_subparsers(title="commands", metavar="COMMAND")


def add_command(subcommands, name: str, help_text: str, run, examples: str = ""):
    parser = documented(subcommands, name, help_text, examples)
    parser.set_defaults(run=run)
    parser.add_argument(
        "--context", metavar="NAME", default=argparse.SUPPRESS, help="use this context instead of the current one"
    )
    return parser


def add_output(parser, *, default: str = "table", choices=output.FORMATS) -> None:
    parser.add_argument("-o", "--output", choices=choices, default=default, help=f"output format (default {default})")


def connect(args) -> Client:
    target = resolve(getattr(args, "context", None))
    return Client(target.url, target.token)


def new_key() -> str:
    """An Idempotency-Key made once per command, so its own retries never act twice."""
    return f"cli-{uuid.uuid4()}"
