"""`cloudpivot cloud list|describe|check|inventory`: the clouds you may use."""

from __future__ import annotations

from cloudpivot_cli import exitcodes, output
from cloudpivot_cli.client import ApiError
from cloudpivot_cli.output import age, field
from cloudpivot_cli.parsing import add_command, add_output, connect

EXAMPLES = """\
  cloudpivot cloud list
  cloudpivot cloud describe local
  cloudpivot cloud inventory k8s-dev nodes
"""

COLUMNS = [
    ("CLOUD", field("cloud_id")),
    ("NAME", field("name")),
    ("BACKEND", field("backend")),
    ("HEALTH", field("health_status")),
    ("CHECKED", age("health_checked_at")),
    ("DISPATCH", field("dispatch_enabled")),
]
WIDE = [
    ("MAX ACTIVE", field("max_active_tasks")),
    ("ENDPOINT", field("endpoint")),
    ("MESSAGE", field("health_message")),
]


def list_clouds(args) -> int:
    output.show(connect(args).get("/api/v1/clouds"), args.output, COLUMNS, WIDE)
    return exitcodes.OK


def describe(args) -> int:
    client = connect(args)
    cloud = client.get(f"/api/v1/clouds/{args.id}")
    capabilities = client.get(f"/api/v1/clouds/{args.id}/capabilities")
    if args.output in ("json", "yaml"):
        output.document(cloud | {"capabilities": capabilities}, args.output)
        return exitcodes.OK
    output.details([(key.replace("_", " ").capitalize(), value) for key, value in cloud.items()])
    print("\nCapabilities:")
    output.document(capabilities, "yaml")
    return exitcodes.OK


def check(args) -> int:
    raise ApiError(
        "the server has no API to check a cloud's connection now (no POST /api/v1/clouds/{id}/check); "
        f"`cloudpivot cloud describe {args.id}` shows the last check's result",
        exit_status=exitcodes.NOT_SUPPORTED,
    )


def inventory(args) -> int:
    body = connect(args).get(f"/api/v1/clouds/{args.id}/resources/{args.kind}")
    items = body.get("items", [])
    if args.output in ("json", "yaml") or not items or not all(isinstance(item, dict) for item in items):
        output.document(body if args.output != "table" else items, "yaml" if args.output == "table" else args.output)
        return exitcodes.OK
    keys = list(dict.fromkeys(key for item in items for key in item))
    output.table(items, [(key.upper(), field(key)) for key in keys])
    return exitcodes.OK


def register(commands) -> None:
    p = add_command(
        commands,
        "list",
        "clouds you may use, with their last health check",
        list_clouds,
        "  cloudpivot cloud list -o wide\n",
    )
    add_output(p)
    p = add_command(
        commands, "describe", "one cloud and what it offers", describe, "  cloudpivot cloud describe local\n"
    )
    p.add_argument("id", metavar="CLOUD")
    add_output(p, choices=("table", "json", "yaml"))
    p = add_command(
        commands,
        "check",
        "check a cloud's connection now (not offered by the API yet)",
        check,
        "  cloudpivot cloud check os-dev\n",
    )
    p.add_argument("id", metavar="CLOUD")
    p = add_command(
        commands,
        "inventory",
        "what a cloud holds, one kind at a time (Kubernetes: nodes, namespaces, pvcs, pods)",
        inventory,
        "  cloudpivot cloud inventory k8s-dev nodes\n  cloudpivot cloud inventory k8s-dev pods -o json\n",
    )
    p.add_argument("id", metavar="CLOUD")
    p.add_argument("kind", metavar="KIND")
    add_output(p, choices=("table", "json", "yaml"))
