"""The OpenAPI schema tells the truth: schemathesis against a real Daphne, and the committed copy is current."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.core.management import call_command

from tests import builders

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.yaml"
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
# What a response may not do: be a 500, carry a status or a body the schema does not describe, or a wrong type.
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)


def test_it_keeps_the_committed_schema_current(tmp_path):
    generated = tmp_path / "openapi.yaml"
    call_command("spectacular", "--file", str(generated), "--validate", "--fail-on-warn")
    assert COMMITTED.read_text() == generated.read_text(), (
        "docs/openapi.yaml is stale: run `python manage.py spectacular --file docs/openapi.yaml`"
    )


def test_it_answers_as_the_schema_says(live, world, tmp_path):
    """Every documented operation, fed schema-driven and edge-case requests, answers only what the schema says."""
    builders.submit(world.alice, cloud="local", project="alpha")
    # The feed's long poll (?wait=, up to 30 s) is exercised by tests/notifications; here it is held at 0 so
    # thousands of requests do not each wait out the timeout. Every other parameter is generated.
    config = tmp_path / "schemathesis.toml"
    config.write_text('[[operations]]\ninclude-path-regex = "^/api/v1/events"\nparameters = { "query.wait" = 0 }\n')
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
            "run",
            f"{live.url}/api/schema/",
            "--checks",
            CHECKS,
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
