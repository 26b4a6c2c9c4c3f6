"""Where a task may ask to run: the node selectors and tolerations a connection lets users choose.

A toleration lets a pod onto nodes tainted to keep it off (GPU nodes, nodes of another team), and a node
selector steers it onto chosen nodes; both are the cluster admin's decisions, so a user may only ask for
what the connection's options allow (the safe default: nothing):

- `allowed_node_selectors`: `{"pool": ["batch", "gpu"], "zone": "*"}`: a label key and the values a task may
  ask for ("*": any value);
- `allowed_tolerations`: `[{"key": "gpu", "effect": "NoSchedule"}, {"key": "batch", "value": "yes"}]`: a
  task's toleration is allowed when one entry has its key and, where the entry sets them, its value and effect
  (a toleration for any value or any effect of a key needs an entry that sets neither).

The connection's own `node_selector` and `tolerations` (added to every Job) are not limited.
"""

from __future__ import annotations

from typing import Any


def placement_errors(spec: dict[str, Any], options: dict[str, Any], *, cloud: str) -> list[dict[str, str]]:
    """Field errors for the node selectors and tolerations the connection does not allow."""
    return selector_errors(spec.get("node_selector") or {}, options, cloud=cloud) + toleration_errors(
        spec.get("tolerations") or [], options, cloud=cloud
    )


def selector_errors(selector: dict[str, str], options: dict[str, Any], *, cloud: str) -> list[dict[str, str]]:
    allowed = options.get("allowed_node_selectors") or {}
    errors = []
    for key, value in selector.items():
        values = allowed.get(key)
        if values is None:
            keys = ", ".join(sorted(allowed)) or "none"
            message = f"the {cloud} cloud does not let tasks choose nodes by {key} (keys it allows: {keys})"
        elif values != "*" and value not in values:
            message = f"the {cloud} cloud allows {key} to be one of {', '.join(values)}, not {value!r}"
        else:
            continue
        errors.append({"field": f"node_selector.{key}", "message": message})
    return errors


def toleration_errors(tolerations: list[dict[str, Any]], options: dict[str, Any], *, cloud: str) -> list[dict]:
    allowed = options.get("allowed_tolerations") or []
    errors = []
    for index, toleration in enumerate(tolerations):
        if not any(covers(entry, toleration) for entry in allowed):
            keys = ", ".join(sorted({str(entry.get("key") or "") for entry in allowed})) or "none"
            errors.append(
                {
                    "field": f"tolerations.{index}",
                    "message": f"the {cloud} cloud does not allow the toleration {describe(toleration)} "
                    f"(keys it allows: {keys})",
                }
            )
    return errors


def covers(entry: dict[str, Any], toleration: dict[str, Any]) -> bool:
    """Whether an allowed entry covers a task's toleration: same key, and no wider value or effect than it sets."""
    if (entry.get("key") or "") != (toleration.get("key") or ""):
        return False
    if entry.get("value") and (toleration.get("operator") == "Exists" or toleration.get("value") != entry["value"]):
        return False
    return not entry.get("effect") or toleration.get("effect") == entry["effect"]


def describe(toleration: dict[str, Any]) -> str:
    key, operator = toleration.get("key") or "(any key)", toleration.get("operator") or "Equal"
    value = f"={toleration.get('value')}" if operator == "Equal" else " exists"
    return f"{key}{value}:{toleration.get('effect') or '(any effect)'}"
