"""The cloudpivot command: argument parsing, dispatch, and one place that turns failures into exit statuses."""

from __future__ import annotations

import argparse
import sys

from cloudpivot_cli import __version__, exitcodes
from cloudpivot_cli.client import ApiError
from cloudpivot_cli.commands import clouds, contexts, events, instances, provenance, sets, tasks, tokens
from cloudpivot_cli.completion import register as register_completion
from cloudpivot_cli.config import ConfigError
from cloudpivot_cli.parsing import UsageError, add_group

DESCRIPTION = """\
CloudPivot from the terminal: submit and follow batch tasks, manage instances, clouds and API tokens.

The server and token come from `cloudpivot login` (named contexts in
$XDG_CONFIG_HOME/cloudpivot/config.yaml, mode 0600); CLOUDPIVOT_URL and CLOUDPIVOT_TOKEN override them.
"""

EXAMPLES = """\
examples:
  cloudpivot login --url http://127.0.0.1:8000          # asks for the token
  cloudpivot task submit -f spec.yaml --wait --follow   # exits with the program's exit code
  cloudpivot task list --state RUNNING -o wide
  cloudpivot set submit -f spec.yaml --items params.jsonl --wait
  cloudpivot task logs -f 3f2c…                         # follow a running task's log
  cloudpivot events -f                                  # every task and operation event as it comes

"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cloudpivot",
        description=DESCRIPTION,
        epilog=EXAMPLES + exitcodes.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cloudpivot {__version__}")
    parser.add_argument("--context", metavar="NAME", help="use this context instead of the current one")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    contexts.register(commands)
    tasks.register(add_group(commands, "task", "submit, list, follow, cancel and retry tasks", tasks.EXAMPLES))
    sets.register(add_group(commands, "set", "task sets: many tasks from one template", sets.EXAMPLES))
    instances.register(
        add_group(commands, "instance", "persistent VMs: create, power actions, snapshots, delete", instances.EXAMPLES)
    )
    clouds.register(add_group(commands, "cloud", "the clouds you may use", clouds.EXAMPLES))
    tokens.register(add_group(commands, "token", "your API tokens", tokens.EXAMPLES))
    events.register(commands)
    provenance.register(commands)
    register_completion(commands, parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        (getattr(args, "group_parser", None) or parser).print_help(sys.stderr)
        return exitcodes.USAGE
    try:
        return run(args) or exitcodes.OK
    except UsageError as exc:
        print(f"cloudpivot: error: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exitcodes.ERROR
    except ApiError as exc:
        print(exc.describe(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `cloudpivot task logs ID | head`
        sys.stderr.close()
        return exitcodes.OK


if __name__ == "__main__":
    raise SystemExit(main())
