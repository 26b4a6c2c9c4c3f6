"""The pod of a task with a debug hold (clusters/debug_hold.py): a second container that outlives a failure.

The kubelet refuses `kubectl exec` into a container that has ended, so keeping a failed pod alone would keep
nothing to get into. With `debug_hold_minutes` the pod gets:
- the program's container (`main`) runs the command through `/bin/sh` (the image needs one, as does the shell
  one gets in), which writes the program's exit code to a shared emptyDir and exits with it: the container's
  termination, its exit code and reason (OOMKilled …) are what the Kubernetes API shows, as without a hold,
  so the attempt ends FAILED at once and observation is unchanged;
- a `debug` container, same image, environment, working directory and mounts, which waits for that file: it
  exits 0 after a success (the pod completes as before), and after a failure stays up for the hold, then
  exits. CloudPivot deletes the Job when the hold ends or is released; the sleep bounds it if it never does.

The Job's activeDeadlineSeconds is lengthened by the hold so that the Job controller does not kill a held pod;
CloudPivot's own timeout (tasks.services.reconcile.timeouts_due) still stops the program on time. A timed-out
Kubernetes attempt is not held: stopping it deletes the Job (only a failure keeps the pod).
"""

from __future__ import annotations

from typing import Any

from clusters.backends.kubernetes.labels import CONTAINER

HOLD_CONTAINER = "debug"  # clusters.debug_hold.HOLD_CONTAINER: the line the page shows names it
HOLD_VOLUME = "cloudpivot-hold"
HOLD_DIR = "/cloudpivot-hold"
# Run the command as given ("$@": no shell parsing of the user's arguments), keep its exit code.
WRAPPER = f'"$@"; rc=$?; echo "$rc" > {HOLD_DIR}/exit; exit "$rc"'
# Small and fixed: the container only sleeps; requests = limits so a namespace's LimitRange is satisfied.
HOLD_RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}}


def hold_seconds(spec: dict[str, Any]) -> int:
    return int(spec.get("debug_hold_minutes") or 0) * 60


def with_debug_hold(spec: dict[str, Any], pod_spec: dict[str, Any], job_spec: dict[str, Any]) -> None:
    """Add the hold's container, volume and wrapper to a Job whose task asks for a hold (in place)."""
    seconds = hold_seconds(spec)
    if not seconds:
        return
    main = next(c for c in pod_spec["containers"] if c["name"] == CONTAINER)
    main["command"] = ["/bin/sh", "-c", WRAPPER, "cloudpivot-task", *main["command"]]
    mount = {"name": HOLD_VOLUME, "mountPath": HOLD_DIR}
    main["volumeMounts"] = [*main.get("volumeMounts", []), mount]
    hold_script = (
        f"while [ ! -e {HOLD_DIR}/exit ]; do sleep 2; done; "
        f'[ "$(cat {HOLD_DIR}/exit)" = 0 ] && exit 0; '
        f'echo "the program failed; this container is kept for {seconds} s for debugging"; '
        f"sleep {seconds}; exit 0"
    )
    debug = {
        "name": HOLD_CONTAINER,
        "image": main["image"],
        "command": ["/bin/sh", "-c", hold_script],
        "env": list(main.get("env") or []),
        "resources": HOLD_RESOURCES,
        "volumeMounts": list(main["volumeMounts"]),
    }
    if main.get("workingDir"):
        debug["workingDir"] = main["workingDir"]
    pod_spec["containers"].append(debug)
    pod_spec["volumes"] = [*pod_spec.get("volumes", []), {"name": HOLD_VOLUME, "emptyDir": {"sizeLimit": "1Mi"}}]
    if job_spec.get("activeDeadlineSeconds"):
        job_spec["activeDeadlineSeconds"] = int(job_spec["activeDeadlineSeconds"]) + seconds + 60
