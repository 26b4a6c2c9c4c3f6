"""Debug holds, the cloud's half: how long a connection lets a failed attempt's pod or VM be kept, and how a
person gets into what is kept (docs/portal.md, "Debug hold").

A connection allows holds through its `debug_hold_max_minutes` option (default 0: not allowed). The `local`
cloud never does: a local task is a process group on the CloudPivot host, with nothing that outlives the
program to get into (a kept run directory would hold no process, and a shell on the CloudPivot host is not
something a task's owner is given). The words here are put next to the field, so they name the cloud.

How to get in is worked out from what CloudPivot recorded (no cloud call, so a page never waits for one):
- Kubernetes: a task with a hold runs with a second container, `debug` (same image, environment and mounts),
  that stays up after the program failed (manifest.py); `kubectl exec -n <namespace> -it <pod> -c debug -- sh`.
  The program's own container has ended, and the kubelet refuses to exec into an ended container.
- OpenStack: the server stays ACTIVE; its console is reached through the cloud's dashboard or
  `openstack console url show <server id>`. The console URL itself is not stored: Nova's console URLs carry a
  short-lived token, so a link written into the page would stop working while the hold still runs.
"""

from __future__ import annotations

from typing import Any

from clusters.models import CloudConnection

OPTION = "debug_hold_max_minutes"
# The longest a hold can be whatever a connection says: a week (beyond that, snapshot the VM as an instance).
MAX_MINUTES = 7 * 24 * 60
HOLD_CONTAINER = "debug"  # the Kubernetes pod's container that stays up (manifest.py)
HOLD_BACKENDS = ("kubernetes", "openstack")


def debug_hold_limit(connection: CloudConnection) -> int:
    """The most minutes a task on this connection may be held after a failure (0: not allowed)."""
    if connection.backend not in HOLD_BACKENDS:
        return 0
    value = (connection.options or {}).get(OPTION) or 0
    return min(int(value), MAX_MINUTES) if isinstance(value, int) and not isinstance(value, bool) else 0


def debug_hold_errors(connection: CloudConnection, spec: dict[str, Any]) -> list[dict[str, str]]:
    """A field error when the task asks a longer hold than its connection allows; empty when it may."""
    minutes = int(spec.get("debug_hold_minutes") or 0)
    if not minutes:
        return []
    limit = debug_hold_limit(connection)
    cloud = connection.cloud_id
    if connection.backend == "local":
        message = (
            f"debug holds are not allowed on {cloud}: a local task is a process on the CloudPivot host, and "
            "nothing of it is left to get into once it ended (use a Kubernetes or OpenStack cloud)"
        )
    elif not limit:
        message = (
            f"debug holds are not allowed on {cloud} (its administrator can allow them with the connection "
            f"option {OPTION})"
        )
    elif minutes > limit:
        message = f"debug holds on {cloud} are limited to {limit} minutes"
    else:
        return []
    return [{"field": "debug_hold_minutes", "message": message}]


def debug_hold_access(
    connection: CloudConnection, *, external_name: str, external_ref: str, facts: dict[str, Any]
) -> dict[str, str]:
    """How to get into a held attempt: {kind, command, words} and the object's names."""
    if connection.backend == "kubernetes":
        namespace = connection.scope or "default"
        pod = str(facts.get("pod") or "")
        if not pod:  # the pod was never seen (it failed before one was listed): find it by the Job's label
            return {
                "kind": "kubectl_exec",
                "namespace": namespace,
                "pod": "",
                "command": f"kubectl get pods -n {namespace} -l cloudpivot.io/attempt={external_name}",
                "words": f"the pod of Job {external_name} was not seen by CloudPivot; list it, then "
                f"kubectl exec -n {namespace} -it <pod> -c {HOLD_CONTAINER} -- sh",
            }
        return {
            "kind": "kubectl_exec",
            "namespace": namespace,
            "pod": pod,
            "command": f"kubectl exec -n {namespace} -it {pod} -c {HOLD_CONTAINER} -- sh",
            "words": f"a shell in the {HOLD_CONTAINER} container of pod {pod}: the task's image, environment and "
            "volumes; the program's own container has ended (its exit code is in /cloudpivot-hold/exit)",
        }
    if connection.backend == "openstack":
        return {
            "kind": "openstack_console",
            "server_id": external_ref,
            "command": f"openstack console url show {external_ref}",
            "words": f"the console of server {external_name} ({external_ref}): open it in the cloud's dashboard, "
            "or get a fresh console link with the command",
        }
    return {}
