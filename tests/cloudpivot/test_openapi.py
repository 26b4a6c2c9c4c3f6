"""The OpenAPI schema tells the truth: schemathesis against a real Daphne, and the committed copy is current."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.core.management import call_command

from tests import builders

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.yaml"
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
# What positive_data_acceptance allows a schema-valid request by default.
POSITIVE = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
# The exclusions, each with its reason; docs/api.md ("What schemathesis is told") lists the same. Every check
# runs on every operation otherwise.
EXCLUSIONS = [
    (
        "422 accepted as an answer to valid data, on every operation: 422 is a well-formed request that the cloud "
        "or a quota cannot take (VM instances on the `local` cloud, a project over its quota). Like 409, which "
        "schemathesis allows already, it depends on the state, not on the document: no schema can avoid it.",
        {"checks": {"positive_data_acceptance": {"expected-statuses": [*POSITIVE, "422"]}}},
    ),
    (
        "400 accepted as an answer to valid data in the coverage phase only, on the other POSTs whose body names a "
        "project, a cloud or a webhook's host: that phase writes the shortest and longest strings the schema "
        "allows ('0', 63 and 64 zeros) and takes no configured values, and a name that does not exist is an "
        "honest 400 on its field (whether it exists is state, not schema). The fuzzing and stateful phases draw "
        "these names from the test world (TEST_DATA) and must still get no 400.",
        {
            "include-path-regex": "^/api/v1/(instances|webhooks|snapshots/[^/]+/restore)/$",
            "include-method": "POST",
            "phase": "coverage",
            "checks": {"positive_data_acceptance": {"expected-statuses": [*POSITIVE, "422", "400"]}},
        },
    ),
    (
        "400 accepted as an answer to valid data on POST /api/v1/tasks/ and /api/v1/task-sets/ in every phase: "
        "the test world's only cloud is `local`, and a cloud checks a task against what it has (tasks/specs.py → "
        "the backend's validate): `local` refuses an image, GPUs, volumes, node selectors and tolerations with a "
        "400 on the field, which the schema must allow because other clouds take them. Which fields a cloud takes "
        "is the cloud's, not the schema's. A set also needs exactly one of count and items, and each `{{name}}` "
        "its template uses in every item, which OpenAPI 3.0 cannot say. The other checks still run there, and "
        "the documents' own rules have their tests (tests/tasks/test_api_submit.py, "
        "tests/tasksets/test_api_submit.py).",
        {
            "include-path-regex": "^/api/v1/(tasks|task-sets)/$",
            "include-method": "POST",
            "checks": {"positive_data_acceptance": {"expected-statuses": [*POSITIVE, "422", "400"]}},
        },
    ),
    (
        "400 accepted as an answer to valid data on GET /api/v1/clouds/{cloud_id}/metrics/: subject_key is "
        "needed when subject_kind is node, instance or project, and OpenAPI 3.0 cannot say that one query "
        "parameter requires another.",
        {
            "include-path-regex": "/metrics/$",
            "checks": {"positive_data_acceptance": {"expected-statuses": [*POSITIVE, "422", "400"]}},
        },
    ),
]
# Not exclusions: data schemathesis cannot invent. Bodies name this world's project and cloud, and a webhook
# URL on a public address given as a number (this machine may have no DNS, and a host that does not resolve
# is an honest 400 on `url`); the feed's long poll (?wait=, up to 30 s, exercised by tests/notifications) is
# held at 0 so thousands of requests do not each wait it out.
TEST_DATA = """
[dictionaries.projects]
values = ["alpha"]

[dictionaries.clouds]
values = ["local"]

[dictionaries.urls]
values = ["https://93.184.215.14/hooks"]

[parameters]
"body.project" = { dictionary = "projects" }
"body.cloud" = { dictionary = "clouds" }
"body.url" = { dictionary = "urls" }

[[operations]]
include-path-regex = "^/api/v1/events"
parameters = { "query.wait" = 0 }
"""


def schemathesis_config() -> str:
    """TOML: the global exclusion as a top-level table, the per-operation ones as [[operations]]."""
    text = ""
    for _, rule in EXCLUSIONS:
        statuses = json.dumps(rule["checks"]["positive_data_acceptance"]["expected-statuses"])
        if "include-path-regex" in rule:
            text += f'\n[[operations]]\ninclude-path-regex = "{rule["include-path-regex"]}"\n'
            if "include-method" in rule:
                text += f'include-method = "{rule["include-method"]}"\n'
            prefix = f"phases.{rule['phase']}." if "phase" in rule else ""
            text += f"{prefix}checks.positive_data_acceptance.expected-statuses = {statuses}\n"
        else:
            text += f"\n[checks.positive_data_acceptance]\nexpected-statuses = {statuses}\n"
    return TEST_DATA + text


def test_it_keeps_the_committed_schema_current(tmp_path):
    generated = tmp_path / "openapi.yaml"
    call_command("spectacular", "--file", str(generated), "--validate", "--fail-on-warn")
    assert COMMITTED.read_text() == generated.read_text(), (
        "docs/openapi.yaml is stale: run `python manage.py spectacular --file docs/openapi.yaml`"
    )


def test_it_answers_as_the_schema_says(live, world, tmp_path):
    """Every documented operation, fed schema-driven and edge-case requests, answers only what the schema says."""
    builders.submit(world.alice, cloud="local", project="alpha")
    config = tmp_path / "schemathesis.toml"
    config.write_text(schemathesis_config())
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
            "run",
            f"{live.url}/api/schema/",
            "--checks",
            "all",
            "--phases",
            os.environ.get("SCHEMATHESIS_PHASES", "examples,coverage,fuzzing,stateful"),
            "--max-examples",
            os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "15"),
            "--workers",
            "1",
            "--header",
            f"Authorization: Bearer {world.tokens['alice']}",
            "--request-timeout",
            "20",
            "--seed",
            "13",
            "--no-color",
            # Hypothesis' "too slow" health check times how fast it builds data for the task document (many
            # patterns, alternatives, a closed object), on a shared CI machine: a fact about the load, not the API.
            "--suppress-health-check",
            "too_slow",
            *os.environ.get("SCHEMATHESIS_ARGS", "").split(),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-3000:]


def test_every_path_under_api_answers_the_error_shape(world, api, pages):
    for client, method, path in [
        (api("bob"), "get", "/api/v1/nothing-here"),
        (api(None), "get", "/api/nope"),
        (pages("bob"), "post", "/api/v1/tasks/0.5/cancel"),  # a session POST: not the CSRF failure page
        (api("bob"), "delete", "/api/v1/tokens/999999"),  # DRF's own Http404
        (api("bob"), "get", "/api/v1/quotas/999999"),
    ]:
        response = getattr(client, method)(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json", path
        assert set(response.json()) == {"code", "message", "errors"} and response.json()["code"] == "not_found"
