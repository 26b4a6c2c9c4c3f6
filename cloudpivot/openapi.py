"""What the OpenAPI schema says beyond the views' own decorators: the one error shape and, per operation, the
error statuses it really answers (with examples), so a client generated from /api/schema/ knows every answer.

The statuses come from where the API raises them (cloudpivot.api's handler over cloudpivot.exceptions):
- 401 everywhere (no, an invalid, an expired or a revoked token);
- 400 where a body or a query parameter is read; 404 where the path names an object (missing and foreign
  objects get the same answer);
- 403, 409, 422 and 502 only on the operations listed in `WRITE_ERRORS` / `CLOUD_ERRORS`, which are
  those whose services raise them; 503 everywhere (the database away), `cloud_unavailable` only there.
- 413 wherever a body is read (a body over the size limit is refused before it is parsed).
- 503 `overloaded` everywhere (a web process over its bounds: cloudpivot/shedding.py).
- 429 everywhere (a token over its rate; on the event feed also a user over their long-polls).
"""

from __future__ import annotations

import re
from typing import Any


def _error(code: str, message: str, errors: list[dict[str, str]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"code": code, "message": message, "errors": errors or []} | extra


# status → (description, {example name: body})
ERROR_EXAMPLES: dict[int, tuple[str, dict[str, dict[str, Any]]]] = {
    400: (
        "The body or a query parameter is wrong; `errors` names each field at fault.",
        {
            "invalid": _error(
                "invalid",
                "invalid task document: command.1: must be a string",
                [{"field": "command.1", "message": "must be a string"}],
            ),
            "parse_error": _error(
                "parse_error",
                "JSON parse error - Expecting value: line 1 column 1 (char 0)",
                [{"field": "", "message": "JSON parse error - Expecting value: line 1 column 1 (char 0)"}],
            ),
        },
    ),
    401: (
        "No token, or an invalid, expired or revoked one.",
        {
            "not_authenticated": _error("not_authenticated", "Authentication credentials were not provided."),
            "authentication_failed": _error("authentication_failed", "Invalid or expired token."),
        },
    ),
    403: (
        "Visible, but your role in the project does not allow it.",
        {
            "permission_denied": _error(
                "permission_denied", "your role in alpha is reader; submitting needs submitter or admin"
            ),
            "admins_only": _error(
                "admins_only", "the nodes of the k3s cloud are cloud-wide: only administrators see them"
            ),
        },
    ),
    404: (
        "Missing, or not visible to you (the same answer).",
        {
            "not_found": _error("not_found", "task 3f8e0c1e-0000-4000-8000-000000000000 not found"),
            "invalid_cursor": _error("not_found", "Invalid cursor"),
        },
    ),
    409: (
        "The request contradicts the current state, or reuses an Idempotency-Key with another body.",
        {
            "idempotency_key_reused": _error(
                "idempotency_key_reused", "this Idempotency-Key was used with another request body"
            ),
            "invalid_state": _error("invalid_state", "a Stopped instance cannot be stopped"),
            "invalid_transition": _error("invalid_transition", "a SUCCEEDED task cannot become CANCELLING"),
            "already_exists": _error(
                "already_exists",
                "project alpha already has a secret named 'db-password'; replace its value with PUT",
                [{"field": "name", "message": "project alpha already has a secret named 'db-password'"}],
            ),
        },
    ),
    422: (
        "Over a quota (ours or the cloud's), or the cloud cannot do this at all.",
        {
            "quota_exceeded": _error(
                "quota_exceeded",
                "quota exceeded: instances 1/0 left (project alpha's quota on os-dev allows 1)",
                asked=1,
                left=0,
                limit=1,
            ),
            "unsupported": _error("unsupported", "this cloud has no block storage: volumes cannot be purged"),
        },
    ),
    413: (
        "The body is over the size limit; nothing was read or stored.",
        {
            "request_too_large": _error(
                "request_too_large", "the task document is 3145728 bytes; at most 1048576 are accepted"
            )
        },
    ),
    429: (
        "Too many requests with this token (CLOUDPIVOT_API_TOKEN_RATE), or too many event-feed long-polls of yours "
        'at once: nothing was done; `Retry-After` says when to try again (docs/api.md, "Limits").',
        {
            "throttled": _error(
                "throttled",
                "too many requests with this token (at most 1200/min): try again in 12 s (the Retry-After header), "
                "and space your calls out; follow changes with the event feed's long-poll (GET /api/v1/events?wait=N) "
                "instead of polling",
            ),
            "too_many_long_polls": _error(
                "too_many_long_polls",
                "you already hold 4 long-polls of the event feed (at most 4 at once): wait for one of them to answer "
                "(in 20 s at the latest, the Retry-After header), or follow the feed with a single long-poll, passing "
                "each answer's next_after as `after`",
            ),
        },
    ),
    502: (
        "The cloud refused the connection's credentials or permissions (an admin's matter).",
        {"cloud_refused": _error("cloud_refused", "the os-dev cloud refused the credentials while reading flavors")},
    ),
    503: (
        "The cloud did not answer a read the request needed, CloudPivot's database is away, or the web process "
        "is busy beyond its bounds (any operation; nothing was done): try again later; `Retry-After` says when "
        "for the database and for a busy server.",
        {
            "cloud_unavailable": _error("cloud_unavailable", "the k3s-lab cloud did not answer: connection refused"),
            "database_unavailable": _error(
                "database_unavailable",
                "the database is not reachable at the moment; nothing was changed, try again shortly",
            ),
            "overloaded": _error("overloaded", "the server is busy: try again in 2 s"),
        },
    ),
    507: (
        "The disk holding CloudPivot's database is full (any operation that writes): nothing was changed; an "
        "operator must free space. `Retry-After` says when to ask again.",
        {
            "storage_full": _error(
                "storage_full",
                "the server's storage is full: nothing was changed; an operator must free space, then try again",
            )
        },
    ),
}

# (method, path pattern) → statuses beyond 400/401/404, from the services each operation calls.
WRITE_ERRORS: list[tuple[str, str, tuple[int, ...]]] = [
    ("POST", r"^/api/v1/tasks/$", (403, 409, 422, 502, 503)),
    ("POST", r"^/api/v1/tasks/\{id\}/(cancel|retry|release-hold)/$", (403, 409)),
    ("POST", r"^/api/v1/task-sets/$", (403, 409, 422, 502, 503)),
    ("POST", r"^/api/v1/task-sets/\{id\}/cancel/$", (403, 409)),
    ("POST", r"^/api/v1/task-sets/\{id\}/retry-failed/$", (403, 409, 422, 502, 503)),
    ("DELETE", r"^/api/v1/task-sets/\{id\}/$", (403, 409)),
    ("POST", r"^/api/v1/instances/$", (403, 409, 422, 502, 503)),
    ("POST", r"^/api/v1/instances/\{id\}/actions/$", (403, 409, 422, 502, 503)),
    ("GET", r"^/api/v1/instances/\{id\}/console/$", (409, 422, 502, 503)),
    ("POST", r"^/api/v1/snapshots/\{id\}/restore/$", (403, 409, 422, 502, 503)),
    ("DELETE", r"^/api/v1/snapshots/\{id\}/$", (403, 409)),
    ("POST", r"^/api/v1/webhooks/$", (403,)),
    ("POST", r"^/api/v1/projects/\{slug\}/secrets/$", (403, 409)),
    ("(PUT|DELETE)", r"^/api/v1/projects/\{slug\}/secrets/\{name\}/$", (403,)),
    ("GET", r"^/api/v1/clouds/\{cloud_id\}/(resources/\{kind\}|metrics)/$", (403, 502, 503)),
    ("GET", r"^/api/v1/clouds/\{cloud_id\}/capabilities/$", (502, 503)),
    ("GET", r"^/api/v1/tasks/\{task_id\}/provenance$", (409,)),
]


def error_responses(*statuses: int) -> dict[str, Any]:
    """OpenAPI responses for these statuses, each with the error body and its examples."""
    return {
        str(status): {
            "description": ERROR_EXAMPLES[status][0],
            "content": {
                "application/json": {
                    "schema": {"$ref": "#/components/schemas/Error"},
                    "examples": {name: {"value": body} for name, body in ERROR_EXAMPLES[status][1].items()},
                }
            },
        }
        for status in statuses
    }


def _statuses_for(method: str, path: str, operation: dict[str, Any]) -> list[int]:
    found = {401, 429, 503}  # 503: the database away (cloudpivot/unavailable.py); 429: the token's rate
    if not operation.get("security"):
        found -= {401, 429}  # an operation without authentication (the provenance key): no token to refuse or count
    if method != "GET":
        found.add(507)  # the database's disk full (cloudpivot/unavailable.py), on every write
    if "{" in path:
        found.add(404)
    if operation.get("requestBody") or any(p.get("in") == "query" for p in operation.get("parameters", [])):
        found.add(400)
    if operation.get("requestBody"):
        found.add(413)
    if any(p.get("name") == "cursor" for p in operation.get("parameters", [])):
        found.add(404)  # DRF's cursor pagination answers a cursor it did not write with 404 "Invalid cursor"
    if any(p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
        found.add(400)  # a key over 200 characters
    for wanted_method, pattern, extra in WRITE_ERRORS:
        if re.fullmatch(wanted_method, method) and re.match(pattern, path):
            found.update(extra)
    return sorted(found)


# Integer bounds that come from the database's column type (Django asks the connection: SQLite says 64 bits
# for every integer column, PostgreSQL 32 for an IntegerField), not from the API's own rules.
DATABASE_BOUNDS = {2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 2**15 - 1, -(2**15)}


def drop_database_bounds(node: Any) -> None:
    """Remove column-type bounds, so the schema is the same whichever database generated it."""
    if isinstance(node, dict):
        if node.get("type") == "integer":
            for key in ("maximum", "minimum"):
                if node.get(key) in DATABASE_BOUNDS:
                    del node[key]
            if node.get("format") == "int64" and "maximum" not in node:
                del node["format"]
        for value in node.values():
            drop_database_bounds(value)
    elif isinstance(node, list):
        for value in node:
            drop_database_bounds(value)


# Request bodies whose fields go together in one of a few ways (the serializers' validate() refuses the rest):
# component → the alternatives, each the fields it needs and the fields it must not have.
ALTERNATIVES: dict[str, list[tuple[list[str], list[str]]]] = {
    "InstanceCreateRequest": [(["flavor"], ["vcpus", "memory_mb"]), (["vcpus", "memory_mb"], ["flavor"])],
    "SnapshotRestoreRequest": [(["instance"], ["name"]), (["name", "flavor"], ["instance"])],
    "SecretRefRequest": [(["env"], ["file"]), (["file"], ["env"])],
}


def state_alternatives(components: dict[str, Any]) -> None:
    """`oneOf` the alternatives of each body in ALTERNATIVES, so a generated body is one the server accepts."""
    for name, alternatives in ALTERNATIVES.items():
        if name in components:
            components[name]["oneOf"] = [
                {"required": needs, "properties": {field: {"not": {}} for field in forbids}}
                for needs, forbids in alternatives
            ]


# Bodies the serializers read strictly (tasks/specs.py StrictSerializer): an unknown field is a 400.
CLOSED = {"TaskSpecRequest", "ResourcesRequest", "VolumeRequest", "TolerationRequest", "SecretRefRequest"}
# DRF's CharField refuses NUL ("Null characters are not allowed"), and so do Django's form fields for queries.
NO_NUL = "^[^\\x00]*$"


def no_nul_strings(node: Any) -> None:
    """Every free-text string the server reads (no enum, format or pattern of its own) states it has no NUL."""
    if isinstance(node, dict):
        if node.get("type") == "string" and not {"enum", "format", "pattern"} & set(node):
            node["pattern"] = NO_NUL
        for key in ("properties", "items", "additionalProperties", "oneOf", "allOf", "anyOf"):
            value = node.get(key)
            if isinstance(value, dict) and key == "properties":
                for child in value.values():
                    no_nul_strings(child)
            elif isinstance(value, dict):
                no_nul_strings(value)
            elif isinstance(value, list):
                for child in value:
                    no_nul_strings(child)


def non_empty_query_strings(operation: dict[str, Any]) -> None:
    """A string query parameter has at least one character: `?state=` is a 400 (cloudpivot/query_params.py)."""
    for parameter in operation.get("parameters", []):
        if parameter.get("in") != "query":
            continue
        schema = parameter.get("schema", {})
        for node in (schema, schema.get("items", {})):
            if node.get("type") == "string" and "enum" not in node:
                node.setdefault("minLength", 1)
        no_nul_strings(schema)


def add_error_responses(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the Error component and each operation's error answers, and the
    same schema on every database (no column-type bounds)."""
    drop_database_bounds(result.get("components", {}))
    components = result.setdefault("components", {}).setdefault("schemas", {})
    state_alternatives(components)
    for name, component in components.items():
        if name.endswith("Request"):
            no_nul_strings(component)
        if name in CLOSED:
            component["additionalProperties"] = False
    components["Error"] = {
        "type": "object",
        "description": "Every error of the API; some codes add fields (quota_exceeded: asked, left, limit).",
        "properties": {
            "code": {"type": "string", "description": "Machine code: invalid, not_found, quota_exceeded …"},
            "message": {"type": "string", "description": "A sentence for people."},
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "field": {"type": "string", "description": "Dotted path into the document; empty: all."},
                        "message": {"type": "string"},
                    },
                    "required": ["field", "message"],
                },
            },
        },
        "required": ["code", "message", "errors"],
    }
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/"):
            continue
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            non_empty_query_strings(operation)
            for status, response in error_responses(*_statuses_for(method.upper(), path, operation)).items():
                operation["responses"].setdefault(status, response)
    return result
