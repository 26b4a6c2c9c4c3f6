"""`cloudpivot instance …`: persistent VMs. Every write is an Operation (202); --wait follows it to its end."""

from __future__ import annotations

import sys
import time

from cloudpivot_cli import exitcodes, output
from cloudpivot_cli.client import ApiError
from cloudpivot_cli.output import age, field
from cloudpivot_cli.parsing import UsageError, add_command, add_output, connect, new_key

EXAMPLES = """\
  cloudpivot instance create vm1 --cloud os-dev --flavor cp.tiny --image cp-runner-fake --wait
  cloudpivot instance stop ID --wait
  cloudpivot instance delete ID --volumes keep
"""

COLUMNS = [
    ("ID", field("id")),
    ("NAME", field("name")),
    ("STATUS", field("status")),
    ("CLOUD", field("cloud")),
    ("PROJECT", field("project")),
    ("FLAVOR", field("flavor")),
    ("AGE", age("created_at")),
]
WIDE = [
    ("IMAGE", field("image")),
    ("VCPUS", field("vcpus")),
    ("MEMORY_MB", field("memory_mb")),
    ("OWNER", field("owner")),
    ("REASON", field("status_reason")),
]
OPERATION_ENDED = {"succeeded", "failed", "cancelled"}
# Plain actions: the CLI's verb → the API's action. `resume` is chosen by status (see resume()).
ACTIONS = {
    "start": "power on a stopped instance",
    "stop": "power off",
    "pause": "pause (keeps memory)",
    "suspend": "suspend to disk",
}


def list_instances(args) -> int:
    rows = list(connect(args).pages("/api/v1/instances", limit=args.limit))
    output.show(rows, args.output, COLUMNS, WIDE)
    return exitcodes.OK


def get(args) -> int:
    instance = connect(args).get(f"/api/v1/instances/{args.id}")
    if args.output in ("json", "yaml"):
        output.document(instance, args.output)
    else:
        output.show([instance], args.output, COLUMNS, WIDE)
    return exitcodes.OK


def submitted(client, operation: dict, args) -> int:
    """Print the Operation; with --wait, poll it to its end (exit 1 when it failed)."""
    print(
        f"operation {operation['id']} {operation['action']} {operation['state']} (instance {operation.get('instance')})"
    )
    if not args.wait:
        return exitcodes.OK
    while operation["state"] not in OPERATION_ENDED:
        time.sleep(1)
        operation = client.get(f"/api/v1/operations/{operation['id']}")
    if operation["state"] == "succeeded":
        print(f"operation {operation['id']} succeeded")
        return exitcodes.OK
    print(f"error: operation {operation['id']} {operation['state']}: {operation.get('error_message')}", file=sys.stderr)
    return exitcodes.ERROR


def create(args) -> int:
    if not args.flavor and not (args.vcpus and args.memory_mb):
        raise UsageError("give --flavor, or --vcpus and --memory-mb")
    body = {"name": args.name, "cloud": args.cloud, "image": args.image}
    extra = {"project": args.project, "flavor": args.flavor, "vcpus": args.vcpus, "memory_mb": args.memory_mb}
    body.update({key: value for key, value in extra.items() if value is not None})
    client = connect(args)
    return submitted(client, client.post("/api/v1/instances", body, key=new_key()), args)


def action(verb: str, **params):
    def run(args) -> int:
        body = {"action": verb, **{key: getattr(args, attr) for key, attr in params.items() if getattr(args, attr)}}
        client = connect(args)
        return submitted(client, client.post(f"/api/v1/instances/{args.id}/actions", body, key=new_key()), args)

    return run


def resume(args) -> int:
    """`resume` undoes pause or suspend: the API names these unpause and resume."""
    client = connect(args)
    status = client.get(f"/api/v1/instances/{args.id}")["status"]
    verb = {"Paused": "unpause", "Suspended": "resume"}.get(status)
    if verb is None:
        raise ApiError(f"instance {args.id} is {status}; only a Paused or Suspended one can resume", status=409)
    body = {"action": verb}
    return submitted(client, client.post(f"/api/v1/instances/{args.id}/actions", body, key=new_key()), args)


def register(commands) -> None:
    p = add_command(
        commands,
        "list",
        "instances of your projects, newest first",
        list_instances,
        "  cloudpivot instance list -o wide\n",
    )
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    add_output(p)
    p = add_command(commands, "get", "one instance", get, "  cloudpivot instance get ID -o yaml\n")
    p.add_argument("id", metavar="ID")
    add_output(p, default="yaml")

    p = add_command(
        commands,
        "create",
        "create an instance (by flavor, or the smallest with --vcpus and --memory-mb)",
        create,
        "  cloudpivot instance create vm1 --cloud os-dev --flavor cp.tiny --image cp-runner-fake --wait\n"
        "  cloudpivot instance create vm2 --cloud os-dev --vcpus 1 --memory-mb 64 --image cp-runner-fake\n",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--cloud", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--project")
    p.add_argument("--flavor")
    p.add_argument("--vcpus", type=int)
    p.add_argument("--memory-mb", type=int)
    p.add_argument("--wait", action="store_true", help="wait for the Operation to end")

    def instance_command(verb: str, text: str, run, example: str = ""):
        p = add_command(commands, verb, text, run, example or f"  cloudpivot instance {verb} ID --wait\n")
        p.add_argument("id", metavar="ID")
        p.add_argument("--wait", action="store_true", help="wait for the Operation to end")
        return p

    for verb, text in ACTIONS.items():
        instance_command(verb, text, action(verb))
    instance_command("resume", "resume a paused or suspended instance", resume)
    p = instance_command("reboot", "reboot (soft unless --hard)", action("reboot", type="reboot_type"))
    p.add_argument("--hard", dest="reboot_type", action="store_const", const="hard", help="a hard reboot")
    p = instance_command(
        "snapshot",
        "snapshot the instance's disk",
        action("snapshot", name="name"),
        "  cloudpivot instance snapshot ID --name before-upgrade --wait\n",
    )
    p.add_argument("--name", required=True)
    p = instance_command(
        "restore",
        "rebuild the instance from one of its project's snapshots",
        action("restore", snapshot="snapshot"),
        "  cloudpivot instance restore ID --snapshot SNAP\n",
    )
    p.add_argument("--snapshot", required=True, metavar="SNAPSHOT_ID")
    p = instance_command(
        "delete",
        "delete the instance; say what becomes of its volumes",
        action("delete", volumes="volumes"),
        "  cloudpivot instance delete ID --volumes keep --wait\n",
    )
    p.add_argument("--volumes", required=True, choices=("keep", "purge"))
